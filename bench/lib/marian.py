"""The Hugging Face Marian peer of the decoding benches: a MarianMTModel of our shape with
random weights, and its beam-4 search with every output held to one length."""

from __future__ import annotations

import torch

from bench.lib.shapes import BEAM, SHAPES
from transformer_core.export.transformers import marian_config
from transformer_core.model.config import ModelConfig


def marian_model(shape: str):
    """HF Marian of the shape, random weights, in eval mode (generate ends at EOS, not forced)."""
    from transformers import MarianMTModel

    config = marian_config(ModelConfig(**SHAPES[shape]), dropout=0.0, forced_eos_token_id=None)
    torch.manual_seed(0)
    return MarianMTModel(config).eval()


def marian_beam_search(peer, src: torch.Tensor, length: int) -> torch.Tensor:
    """Marian's beam-4 outputs of ``src`` (decoder start token first), each ``length`` tokens
    long: EOS held off until then, as ``min_len`` holds it off in ours."""
    with torch.inference_mode():
        return peer.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            num_beams=BEAM,
            do_sample=False,
            min_new_tokens=length,
            max_new_tokens=length,
            length_penalty=0.6,
            early_stopping=False,
        )


def marian_runner(model, forced: int):
    """Decode batches (lists of sources, each a list of piece ids without EOS) with HF Marian's
    generate, every output ``forced`` tokens long."""

    def run(batches: list[list[list[int]]]) -> list[list[int]]:
        outputs = []
        for batch in batches:
            out = marian_beam_search(model, torch.tensor([ids + [3] for ids in batch]), forced)
            outputs += out[:, 1:].tolist()
        return outputs

    return run
