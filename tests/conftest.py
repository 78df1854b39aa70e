"""The tiny Transformers the tests build: one default shape, the seeded model of a config, and
the shape the training tests train; and the session's one run of the smoke quickstart.

Test modules import these as plain names (``from conftest import tiny_config, tiny_model``;
pytest puts tests/ on ``sys.path``), not as fixtures: most use them at import time, in module
constants and ``parametrize`` lists. A test that checks something of a particular shape (a FLOP count,
a checkpoint's config) passes its differences from ``TINY_SHAPE`` as overrides, so every shape
still reads where it is used.
"""

import pytest
import torch
from smoke_run import run_quickstart

from transformer_core.config import ModelConfig
from transformer_core.model import Transformer

# Milliseconds a forward pass on a 2-core CPU, yet every part there: two layers a side, several
# heads, h * d_k == d_model. No dropout, so train mode is deterministic too; 64 positions cover
# every test sequence.
TINY_SHAPE = dict(
    vocab_size=50,
    encoder_layers=2,
    decoder_layers=2,
    d_model=32,
    d_ff=64,
    h=4,
    d_k=8,
    d_v=8,
    dropout=0.0,
    max_positions=64,
)

# The model the training tests train: overrides of the base preset, which gives the rest (dropout
# and label smoothing included). About 22K parameters with their 24-token corpora.
TRAIN_SHAPE = dict(encoder_layers=1, decoder_layers=1, d_model=32, d_ff=64, h=2, d_k=16, d_v=16)


def tiny_config(**overrides) -> ModelConfig:
    """``TINY_SHAPE`` with ``overrides`` (any ModelConfig field) on top."""
    return ModelConfig(**{**TINY_SHAPE, **overrides})


def tiny_model(cfg: ModelConfig, *, seed: int = 0, sharp: bool = False) -> Transformer:
    """A Transformer of ``cfg`` in eval mode, initialized after ``torch.manual_seed(seed)``.

    ``sharp`` multiplies the shared embedding by 4: larger logits than the initialization gives,
    so sharper and more varied next-token distributions (search tests need outputs that differ
    from sentence to sentence and hypotheses whose scores are far apart).
    """
    torch.manual_seed(seed)
    model = Transformer(cfg).eval()
    if sharp:
        with torch.no_grad():
            model.embedding.weight.mul_(4.0)
    return model


@pytest.fixture(scope="session")
def smoke_quickstart(tmp_path_factory):
    """The README quickstart on the smoke configuration, run once (``tests/smoke_run.py``).

    Tests must not change its working directory: copy it to carry on from it.
    """
    return run_quickstart(tmp_path_factory.mktemp("smoke_quickstart"))
