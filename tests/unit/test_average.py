"""Checkpoint averaging: known tensors, refusals, the CLI, and load_model on the result."""

import subprocess
import sys

import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.errors import UserError
from transformer_core.model.checkpoint import (
    checkpoint_path,
    list_checkpoints,
    load_checkpoint,
    load_model,
    prune_checkpoints,
    save_checkpoint,
)
from transformer_core.model.transformer import Transformer
from transformer_core.training.average import average_checkpoints, average_files, last_checkpoints

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

# dropout and max_positions: ModelConfig's defaults, not TINY_SHAPE's.
CFG = tiny_config(
    vocab_size=20,
    encoder_layers=1,
    decoder_layers=1,
    d_model=8,
    d_ff=16,
    h=2,
    d_k=4,
    d_v=4,
    dropout=0.1,
    max_positions=1024,
)


def ckpt(values, cfg=CFG):
    return {"model_config": cfg.to_dict(), "model": {k: torch.tensor(v) for k, v in values.items()}}


def test_mean_of_known_tensors():
    config, state = average_checkpoints(
        [
            ckpt({"w": [1.0, 2.0], "b": [[0.0]], "n": [3]}),
            ckpt({"w": [3.0, 6.0], "b": [[1.0]], "n": [3]}),
            ckpt({"w": [5.0, 1.0], "b": [[2.0]], "n": [3]}),
        ]
    )
    assert config == CFG
    torch.testing.assert_close(state["w"], torch.tensor([3.0, 3.0]))
    torch.testing.assert_close(state["b"], torch.tensor([[1.0]]))
    assert state["n"].tolist() == [3] and state["w"].dtype == torch.float32


def test_mismatches_are_refused_with_clear_errors():
    with pytest.raises(UserError, match="model configs differ in d_ff"):
        average_checkpoints([ckpt({"w": [1.0]}), ckpt({"w": [1.0]}, CFG.replace(d_ff=32))])
    with pytest.raises(UserError, match=r"w is \(2,\)"):
        average_checkpoints([ckpt({"w": [1.0]}), ckpt({"w": [1.0, 2.0]})], ["a.pt", "b.pt"])
    with pytest.raises(UserError, match="different parameters"):
        average_checkpoints([ckpt({"w": [1.0]}), ckpt({"v": [1.0]})])
    with pytest.raises(UserError, match="no checkpoints"):
        average_checkpoints([])


def test_run_dir_selection_and_pruning(tmp_path):
    directory = tmp_path / "run" / "checkpoints"
    for step in (5, 10, 15, 20):
        save_checkpoint(
            checkpoint_path(directory, step), CFG, {"w": torch.tensor([float(step)])}, step=step
        )
    (directory / ".step_0000025.pt.abc.tmp").write_bytes(b"partial")  # an interrupted write
    assert [s for s, _ in list_checkpoints(directory)] == [5, 10, 15, 20]
    assert [p.name for p in last_checkpoints(tmp_path / "run", 2)] == [
        "step_0000015.pt",
        "step_0000020.pt",
    ]
    with pytest.raises(UserError, match="holds 4 checkpoint"):
        last_checkpoints(tmp_path / "run", 5)
    prune_checkpoints(directory, 3)
    assert [s for s, _ in list_checkpoints(directory)] == [10, 15, 20]


def test_cli_writes_a_loadable_checkpoint(tmp_path):
    run = tmp_path / "run"
    models = []
    for step in (1, 2):
        model = tiny_model(CFG, seed=step)
        models.append(model)
        save_checkpoint(
            checkpoint_path(run / "checkpoints", step), CFG, model.state_dict(), step=step
        )
    out = tmp_path / "avg.pt"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "average",
            "--run-dir",
            str(run),
            "--last",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    averaged = load_model(out)
    expected = (models[0].embedding.weight + models[1].embedding.weight) / 2
    torch.testing.assert_close(averaged.embedding.weight, expected)
    assert load_checkpoint(out)["steps"] == [1, 2]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "average",
            "--run-dir",
            str(run),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--last" in bad.stderr
    # An average with one of its own sources would weigh that source twice: refused.
    again = subprocess.run(
        [sys.executable, "-m", "transformer_core", "average", "--checkpoints", str(out),
         str(checkpoint_path(run / "checkpoints", 2)), "--out", str(tmp_path / "twice.pt")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert again.returncode == 2 and not (tmp_path / "twice.pt").exists()
    assert again.stderr.strip().splitlines() == [
        f"transformer-core average: error: {out} is itself an average (of "
        f"{checkpoint_path(run / 'checkpoints', 1)}, {checkpoint_path(run / 'checkpoints', 2)}): "
        "average the training checkpoints it was made from instead"
    ]


def test_different_shapes_from_files(tmp_path):
    save_checkpoint(tmp_path / "a.pt", CFG, Transformer(CFG).state_dict())
    big = CFG.replace(d_model=16, d_k=8, d_v=8)
    save_checkpoint(tmp_path / "b.pt", big, Transformer(big).state_dict())
    with pytest.raises(UserError, match="b.pt.*d_k, d_model, d_v"):
        average_files([tmp_path / "a.pt", tmp_path / "b.pt"], tmp_path / "out.pt")
    assert not (tmp_path / "out.pt").exists()
