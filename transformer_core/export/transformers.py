"""Exporting a trained model to Hugging Face ``transformers``: a MarianMT model folder.

``transformers`` calls this architecture MarianMT: post-norm layers, sinusoidal positions,
embeddings scaled by sqrt(d_model) and shared by both stacks and the output layer, ReLU.
``MarianMTModel.from_pretrained`` and ``MarianTokenizer.from_pretrained`` load the folder.
What differs, and how each is handled:

- **The sinusoids' layout.** The paper (and ``Transformer``) interleaves sin and cos along the
  model dimension, PE(pos, 2i) = sin, PE(pos, 2i+1) = cos; Marian puts every sine before every
  cosine. That is a permutation of the model dimension, and the whole network can absorb it:
  every vector of the residual stream (embeddings, positions, sub-layer outputs, layer norms)
  is stored permuted (``marian_order``), and every matrix that reads or writes the stream has
  its columns or rows permuted alike. Layer norms and the elementwise additions do not depend
  on the order of the features, so the network computes the same function, up to the rounding
  of the two sinusoid tables (Marian computes its own in float64).
- **The decoder's first token** is ``decoder_start_token_id``: our ``<s>``. The tokenizer
  appends ``</s>`` to the source, as ``translate`` does.
- **Layer norms' epsilon.** Marian's are torch's default, 1e-5 (its configuration has no key
  for it); ours are 1e-6. This is the one difference the export cannot remove: on a trained
  smoke model the logits agree to about 1e-5 and greedy outputs are identical
  (tests/workflow/test_export_of_the_quickstart_model.py).
- **Search.** ``generate``'s ``length_penalty`` divides by |Y|^alpha, CTranslate2's way, not by
  GNMT's ((5 + |Y|) / 6)^alpha; the folder's generation configuration has the beam and alpha
  that made the card's score (its ``decoding`` record; else the paper's beam 4 and alpha 0.6,
  and the card says the score records no search)
  and suppresses ``<pad>`` and ``<s>``, which ``translate`` never generates.

Models that MarianMT cannot express are refused with one line naming the setting: learned
positions (Table 3's row E), h * d_k != d_model or d_k != d_v (rows B).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from transformer_core.errors import UserError
from transformer_core.export.card import model_card, score_search
from transformer_core.export.folder import sentencepiece_vocabulary, write_export
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import MultiHeadAttention, Transformer

CARD = "README.md"


def require_transformers():
    """The ``transformers`` module, or a UserError saying which extra installs it."""
    try:
        import transformers
    except ImportError:
        raise UserError(
            "exporting to transformers needs the transformers package: "
            'pip install -e ".[hf]" (or pip install transformers)'
        ) from None
    return transformers


def check_marian(model: Transformer) -> None:
    """UserError naming the setting for a model that MarianMT cannot express."""
    cfg = model.cfg
    if cfg.positional != "sinusoidal":
        raise UserError(
            f"transformers' MarianMT has sinusoidal positions only; this model's are "
            f"positional={cfg.positional!r} (Table 3's row E)"
        )
    if cfg.d_k != cfg.d_v or cfg.h * cfg.d_k != cfg.d_model:
        raise UserError(
            f"transformers' MarianMT needs h * d_k = h * d_v = d_model; this model has h={cfg.h}, "
            f"d_k={cfg.d_k}, d_v={cfg.d_v}, d_model={cfg.d_model} (Table 3's rows (B) change d_k alone)"
        )
    if cfg.d_model % 2:
        raise UserError(f"transformers' MarianMT needs an even d_model, got {cfg.d_model}")


def marian_order(d_model: int) -> torch.Tensor:
    """Marian's feature h is our feature ``order[h]``: its sines (our even features) first, then
    its cosines (our odd ones)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_config(cfg: ModelConfig, **overrides: Any) -> Any:
    """The ``MarianConfig`` of a model of ``cfg``: the same shape, post-norm ReLU layers, scaled
    and shared embeddings tied to the output, and ``cfg``'s special ids (``overrides`` replace
    any field; the benchmarks' Marian peers are built here too)."""
    transformers = require_transformers()
    fields = dict(
        vocab_size=cfg.vocab_size,
        decoder_vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.h,
        decoder_attention_heads=cfg.h,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function="relu",
        dropout=cfg.dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=cfg.max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=cfg.pad_id,
        eos_token_id=cfg.eos_id,
        bos_token_id=cfg.bos_id,
        decoder_start_token_id=cfg.bos_id,
        forced_eos_token_id=cfg.eos_id,
    )
    return transformers.MarianConfig(**{**fields, **overrides})


def generation_config(model: Transformer, sp, alpha: float, beam: int = 4) -> Any:
    """``generate``'s defaults: ``beam`` (the paper's 4) at ``alpha`` (a length penalty of its
    own formula, see the docstring; none for greedy search, beam 1, which has no use for one),
    never ``<pad>`` or ``<s>``, the longest output the positions allow."""
    transformers = require_transformers()
    penalty = {"length_penalty": alpha} if beam > 1 else {}
    return transformers.GenerationConfig(
        decoder_start_token_id=sp.bos_id(),
        bos_token_id=sp.bos_id(),
        eos_token_id=sp.eos_id(),
        forced_eos_token_id=sp.eos_id(),
        pad_token_id=sp.pad_id(),
        num_beams=beam,
        **penalty,
        max_length=model.cfg.max_positions,
        suppress_tokens=[sp.pad_id(), sp.bos_id()],
    )


def marian_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """``model``'s weights under Marian's names, the model dimension in Marian's order."""
    order = marian_order(model.cfg.d_model)
    out: dict[str, torch.Tensor] = {}

    def reads(name: str, linear: torch.nn.Linear) -> None:  # input: the residual stream
        out[f"{name}.weight"] = linear.weight[:, order]
        out[f"{name}.bias"] = linear.bias

    def writes(name: str, linear: torch.nn.Linear) -> None:  # output: the residual stream
        out[f"{name}.weight"] = linear.weight[order, :]
        out[f"{name}.bias"] = linear.bias[order]

    def norm(name: str, layer_norm: torch.nn.LayerNorm) -> None:
        out[f"{name}.weight"], out[f"{name}.bias"] = (
            layer_norm.weight[order],
            layer_norm.bias[order],
        )

    def attention(name: str, attn: MultiHeadAttention) -> None:
        reads(f"{name}.q_proj", attn.w_q)
        reads(f"{name}.k_proj", attn.w_k)
        reads(f"{name}.v_proj", attn.w_v)
        writes(f"{name}.out_proj", attn.w_o)

    def feed_forward(name: str, layer) -> None:
        reads(f"{name}.fc1", layer.feed_forward.w_1)
        writes(f"{name}.fc2", layer.feed_forward.w_2)

    embedding = model.embedding.weight[:, order]
    for key in (
        "model.shared",
        "model.encoder.embed_tokens",
        "model.decoder.embed_tokens",
        "lm_head",
    ):
        out[f"{key}.weight"] = embedding
    for i, layer in enumerate(model.encoder_layers):
        name = f"model.encoder.layers.{i}"
        attention(f"{name}.self_attn", layer.self_attn)
        norm(f"{name}.self_attn_layer_norm", layer.norm_1)
        feed_forward(name, layer)
        norm(f"{name}.final_layer_norm", layer.norm_2)
    for i, layer in enumerate(model.decoder_layers):
        name = f"model.decoder.layers.{i}"
        attention(f"{name}.self_attn", layer.self_attn)
        norm(f"{name}.self_attn_layer_norm", layer.norm_1)
        attention(f"{name}.encoder_attn", layer.cross_attn)
        norm(f"{name}.encoder_attn_layer_norm", layer.norm_2)
        feed_forward(name, layer)
        norm(f"{name}.final_layer_norm", layer.norm_3)
    out["final_logits_bias"] = torch.zeros(1, model.cfg.vocab_size)
    return {
        key: tensor.detach().to("cpu", torch.float32).contiguous() for key, tensor in out.items()
    }


def marian_model(model: Transformer, sp, alpha: float = 0.6, beam: int = 4):
    """A ``MarianMTModel`` (eval mode) that computes what ``model`` computes, searching with
    ``beam`` and ``alpha`` by default."""
    transformers = require_transformers()
    check_marian(model)
    hf = transformers.MarianMTModel(
        marian_config(
            model.cfg,
            pad_token_id=sp.pad_id(),
            eos_token_id=sp.eos_id(),
            bos_token_id=sp.bos_id(),
            decoder_start_token_id=sp.bos_id(),
            forced_eos_token_id=sp.eos_id(),
        )
    )
    hf.generation_config = generation_config(model, sp, alpha, beam)
    missing, unexpected = hf.load_state_dict(marian_state_dict(model), strict=False)
    left = [key for key in missing if not key.endswith("embed_positions.weight")]
    if left or unexpected:
        raise RuntimeError(
            f"MarianMTModel's weights do not match: missing {left}, unexpected {unexpected}"
        )
    return hf.eval()


def export_transformers(
    model: Transformer,
    sp,
    spm_path: str | os.PathLike,
    out: str | os.PathLike,
    facts: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` as a MarianMT folder ``out`` (weights, configuration, generation
    configuration, tokenizer files, model card); ``facts`` (checkpoint, score, command, ...) go
    into the card and ``export.json``. ``out`` is either the whole export or absent."""
    transformers = require_transformers()
    facts = facts or {}
    # The search that made the card's score; else the paper's beam 4 and alpha 0.6, which the
    # card does not claim for the score.
    beam, alpha = score_search(facts.get("score")) or (4, 0.6)
    hf = marian_model(model, sp, alpha, beam)
    pieces, specials = sentencepiece_vocabulary(sp)

    def fill(folder: Path) -> dict[str, Any]:
        hf.save_pretrained(folder)
        for name in ("source.spm", "target.spm"):  # one joint model serves both sides
            shutil.copyfile(spm_path, folder / name)
        (folder / "vocab.json").write_text(
            json.dumps({piece: i for i, piece in enumerate(pieces)}, ensure_ascii=False, indent=1)
        )
        tokenizer_config = {
            "tokenizer_class": "MarianTokenizer",
            "unk_token": specials["unk"],
            "eos_token": specials["eos"],
            "pad_token": specials["pad"],
            "separate_vocabs": False,
            "model_max_length": model.cfg.max_positions,
        }
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
        (folder / CARD).write_text(model_card(model, facts))
        return {
            "format": "transformers",
            "transformers_version": transformers.__version__,
            "architecture": "MarianMTModel",
            **{
                k: v
                for k, v in facts.items()
                if k in ("checkpoint", "checkpoint_sha256", "spm_sha256")
            },
        }

    return write_export(Path(out), fill)
