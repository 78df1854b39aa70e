"""The model shapes and step sizes the benchmarks share, so that a bench's ``tiny`` or ``base``
is every other bench's.

``SHAPES``: overrides of the paper's base model (``model_config("base", **SHAPES[name])``,
or ``ModelConfig`` with dropout off for decoding): the tiny shape (2+2 layers, d_model 128,
d_ff 512, 4 heads, vocabulary 8000), the Multi30k shape (config/multi30k.yaml: 3+3 layers,
d_model 256, d_ff 1024, 8 heads, vocabulary 8000), the paper's base and big (vocabulary 37000).
"""

from __future__ import annotations

from transformer_core.model.config import ModelConfig

SHAPES = {
    "tiny": {"encoder_layers": 2, "decoder_layers": 2, "d_model": 128, "d_ff": 512, "h": 4,
             "d_k": 32, "d_v": 32, "vocab_size": 8000},
    "multi30k": {"encoder_layers": 3, "decoder_layers": 3, "d_model": 256, "d_ff": 1024,
                 "d_k": 32, "d_v": 32, "vocab_size": 8000},
    "base": {"vocab_size": 37000},
    "big": {"d_model": 1024, "d_ff": 4096, "h": 16, "dropout": 0.3, "vocab_size": 37000},
}  # fmt: skip
DECODE_SHAPES = ("tiny", "base")  # the shapes the decoding benches build beside Marian
# The small model of the host and step-shape counts (any vocabulary).
SMALL = dict(encoder_layers=2, decoder_layers=2, d_model=64, d_ff=128, h=4, d_k=16, d_v=16)
TOKENS_PER_STEP = 4000  # target tokens of a CPU training bench's step
# The decoding benches' batch: 32 sources of 30 tokens, 30 output tokens each, beam 4.
BATCH, SRC_LEN, OUT_LEN, BEAM = 32, 30, 30, 4


def decoding_config(shape: str) -> ModelConfig:
    """The model configuration of ``SHAPES[shape]`` with dropout off, as decoding runs it."""
    return ModelConfig(**{**SHAPES[shape], "dropout": 0.0})
