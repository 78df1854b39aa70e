"""Checkpoint files rebuild their model alone; bad files are clear errors."""

import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.errors import UserError
from transformer_core.model.checkpoint import load_checkpoint, load_model, save_checkpoint

# dropout and max_positions: ModelConfig's defaults, not TINY_SHAPE's.
CFG = tiny_config(
    vocab_size=30,
    encoder_layers=1,
    decoder_layers=1,
    d_model=16,
    d_ff=32,
    h=2,
    dropout=0.1,
    max_positions=1024,
)


def test_model_rebuilt_from_checkpoint_alone(tmp_path):
    model = tiny_model(CFG)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, CFG, model.state_dict(), step=7)
    loaded = load_model(path)
    assert loaded.cfg == CFG and load_checkpoint(path)["step"] == 7
    src, tgt = torch.tensor([[5, 6, 3]]), torch.tensor([[2, 9]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(src, tgt), model(src, tgt))


def test_missing_and_corrupt_checkpoints_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_checkpoint(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="bad.pt"):
        load_checkpoint(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(1)}, foreign)
    with pytest.raises(UserError, match="not a transformer-core checkpoint"):
        load_checkpoint(foreign)
