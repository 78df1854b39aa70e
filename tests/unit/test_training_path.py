"""What ``auto`` trains with (training/path.py), on every device type it decides for: torch
device objects alone, no GPU needed. ``AUTO_COMPILE`` is patched where a branch needs the GPU
switch on (it ships off until a GPU shows the fast path learns as eager does)."""

import numpy as np
import pytest
import torch
from conftest import TRAIN_SHAPE

from transformer_core import device as device_module
from transformer_core.model.config import model_config
from transformer_core.settings import TrainSettings
from transformer_core.training import path as training_path
from transformer_core.training.path import (
    TrainingPath,
    break_even,
    kept,
    recorded,
    resolve,
    widths_met,
)
from transformer_core.training.runtime import resolve_runtime

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
BF16 = torch.bfloat16
SETTINGS = TrainSettings(max_tokens=64, tokens_per_step=64, warmup=10)


@pytest.fixture
def cuda_switch_on(monkeypatch):
    table = {**device_module.AUTO_COMPILE["train"], "cuda": (True, "measured faster")}
    monkeypatch.setitem(device_module.AUTO_COMPILE, "train", table)


def test_on_a_cpu_auto_is_eager_exact_fp32_and_says_why():
    path = resolve(CPU, SETTINGS, None, 100_000, 15)
    assert path == TrainingPath("off", "exact", "fp32", path.why)
    assert path.why == f"--compile auto: {device_module.AUTO_COMPILE['train']['cpu'][1]}"
    assert resolve(CPU, SETTINGS, BF16, 100_000, 15).compute_weights == "fp32"


def test_on_a_gpu_with_the_switch_off_auto_stays_eager():
    path = resolve(CUDA, SETTINGS, BF16, 100_000, 15)
    assert (path.compile, path.batch_shapes, path.compute_weights) == ("off", "exact", "fp32")


def test_a_gpu_run_compiles_only_past_its_break_even(cuda_switch_on):
    per_width = break_even(CUDA)
    assert per_width == 1152 and break_even(CPU) is None  # 44 s / (79.0 - 40.8) ms
    long = resolve(CUDA, SETTINGS, BF16, per_width * 15, 15)
    assert (long.compile, long.batch_shapes, long.compute_weights) == ("on", "fixed", "bf16")
    assert "17,280 steps, at least 15 batch widths x 1,152 steps a width" in long.why
    short = resolve(CUDA, SETTINGS, BF16, per_width * 15 - 1, 15)
    assert (short.compile, short.batch_shapes, short.compute_weights) == ("off", "exact", "fp32")
    assert "eager: 17,279 steps, fewer than 15 batch widths x 1,152" in short.why


def test_explicit_settings_are_used_as_given(cuda_switch_on):
    on = TrainSettings(**{**SETTINGS.to_dict(), "compile": "on"})
    assert resolve(CUDA, on, BF16, 10, 15).compute_weights == "bf16"  # no gate: asked for
    assert resolve(CUDA, on, None, 10, 15).compute_weights == "fp32"  # fp32 precision
    fp32 = TrainSettings(**{**on.to_dict(), "compute_weights": "fp32"})
    assert resolve(CUDA, fp32, BF16, 10, 15).compute_weights == "fp32"
    exact = TrainSettings(**{**on.to_dict(), "batch_shapes": "exact"})
    assert resolve(CUDA, exact, BF16, 10, 15).batch_shapes == "exact"
    off = TrainSettings(**{**SETTINGS.to_dict(), "compile": "off"})
    assert resolve(CUDA, off, BF16, 10**9, 15).compile == "off"


def test_a_resumed_run_keeps_what_it_recorded_where_its_settings_say_auto(cuda_switch_on):
    fresh = resolve(CUDA, SETTINGS, BF16, 10**9, 15)  # what auto picks today: the fast path
    record = {"compile": "off", "batch_shapes": "exact", "compute_weights": "fp32"}
    resumed = kept(fresh, SETTINGS, record)
    assert (resumed.compile, resumed.batch_shapes, resumed.compute_weights) == (
        "off", "exact", "fp32",
    )  # fmt: skip
    assert "resumed as recorded: compile off, batch_shapes exact, compute_weights fp32" in (
        resumed.why
    )
    explicit = TrainSettings(**{**SETTINGS.to_dict(), "compile": "on", "batch_shapes": "fixed"})
    mixed = kept(resolve(CUDA, explicit, BF16, 10, 15), explicit, record)
    assert (mixed.compile, mixed.batch_shapes, mixed.compute_weights) == ("on", "fixed", "fp32")
    assert kept(fresh, SETTINGS, fresh.record()) == fresh  # nothing to keep: unchanged


def test_a_checkpoint_from_before_paths_were_recorded():
    assert recorded(None) == {} and recorded({"training_path": {"compile": "on"}}) == {
        "compile": "on"
    }
    both_auto = {"data": {"fixed_shapes": True},
                 "train_config": {"compile": "auto", "batch_shapes": "auto"}}  # fmt: skip
    assert recorded(both_auto) == {"batch_shapes": "fixed", "compile": "on"}
    explicit = {"data": {"fixed_shapes": True}, "train_config": {"compile": "off"}}
    assert recorded(explicit) == {"batch_shapes": "fixed"}
    assert recorded({"data": {}, "train_config": {}}) == {"batch_shapes": "exact"}


def test_widths_met_counts_the_ladder_widths_of_the_longer_sides():
    src, tgt = np.array([3, 10, 60, 70]), np.array([5, 2, 61, 90])
    # longer side + 1: 6, 11, 62, 91 -> widths 8, 16, 64, 104
    assert widths_met(src, tgt) == 4 and widths_met(np.array([]), np.array([])) == 0
    assert training_path.WARM_UP["cuda"][0] == 44.0


def test_a_runs_runtime_is_resolved_once_for_a_fresh_start_and_for_a_resume():
    """``resolve_runtime``: the micro-batch ``auto`` picks, the autocast and the path of a fresh
    run; and what a resumed run keeps of them, from its checkpoint's record."""
    model_cfg = model_config("base", vocab_size=24, **TRAIN_SHAPE)
    cfg = TrainSettings(tokens_per_step=6400, warmup=10)  # max_tokens, compile, shapes: auto
    payload = {
        "train_config": {"max_tokens": 1000},
        "training_path": {"compile": "on", "batch_shapes": "fixed", "compute_weights": "fp32"},
    }
    fresh, resumed = resolve_runtime(cfg, model_cfg, CPU, 1, 15, payload)
    autocast = device_module.autocast_dtype(CPU, "auto")
    assert (fresh.settings.max_tokens, resumed.settings.max_tokens) == (3125, 1000)
    assert fresh.autocast == resumed.autocast == autocast
    assert fresh.path == resolve(CPU, cfg, autocast, cfg.steps, 15)
    assert resumed.path == kept(fresh.path, cfg, recorded(payload))
    assert (resumed.path.compile, resumed.path.batch_shapes) == ("on", "fixed")
    assert resolve_runtime(cfg, model_cfg, CPU, 1, 15) == (fresh, fresh)  # no checkpoint
