"""A command's ``InferenceSettings`` resolved on its device (decoding/inference.py's
``resolve_inference``): the choices ``translate``, ``bleu_curve`` and ``ppl`` take, the one way
they take them."""

import pytest
import torch

from transformer_core.cli import main
from transformer_core.decoding import inference
from transformer_core.decoding.inference import (
    DecodingRuntime,
    ResolvedInference,
    resolve_inference,
)
from transformer_core.device import AUTO_COMPILE, cpu_has_native_bf16
from transformer_core.errors import UserError
from transformer_core.settings import InferenceSettings

CPU = torch.device("cpu")


@pytest.fixture
def threads():
    """Put torch's CPU threads back after a test that sets them."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_settings_resolve_to_the_device_precision_compile_and_batch(threads):
    settings = InferenceSettings(
        device="cpu", precision="fp32", compile="on", num_threads=1, max_tokens=100
    )
    resolved = resolve_inference(settings)
    assert resolved == ResolvedInference(
        CPU, DecodingRuntime(100, None, True, False), "--compile on"
    )
    assert torch.get_num_threads() == 1
    assert resolved.describe() == (
        "decoding on cpu (1 CPU thread), precision fp32 (scores in fp32), compiled step "
        "(--compile on)"
    )
    auto = resolve_inference(InferenceSettings(device="cpu"))
    assert auto.decoding.compile is AUTO_COMPILE["decode"]["cpu"][0]
    assert auto.compile_why == f"--compile auto: {AUTO_COMPILE['decode']['cpu'][1]}"
    assert auto.decoding.autocast == (torch.bfloat16 if cpu_has_native_bf16() else None)


def test_int8_makes_precision_auto_fp32_and_refuses_bf16():
    resolved = resolve_inference(InferenceSettings(device="cpu", compile="off"), int8=True)
    assert resolved.decoding == DecodingRuntime(autocast=None, int8=True)
    assert "precision int8 (dynamic) (scores in fp32), eager step" in resolved.describe()
    # bf16 asked for: refused for int8 where bf16 is native, for bf16 itself elsewhere
    words = "--quantize int8" if cpu_has_native_bf16() else "--precision bf16"
    with pytest.raises(UserError, match=words):
        resolve_inference(InferenceSettings(device="cpu", precision="bf16"), int8=True)


class Resolved(Exception):
    """Raised by the recording resolver: the command stops before it loads anything."""


def test_translate_bleu_curve_and_ppl_resolve_the_same_runtime(tmp_path, monkeypatch, threads):
    """The three commands, given the same runtime flags, call the one resolver, which returns
    the same runtime to each."""
    seen = []

    def recording(settings, int8=False):
        seen.append(resolve_inference(settings, int8=int8))
        raise Resolved

    monkeypatch.setattr(inference, "resolve_inference", recording)
    (tmp_path / "src.txt").write_text("a\n")
    (tmp_path / "ref.txt").write_text("a\n")
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "step_1.pt").write_bytes(b"")
    runtime = ["--device", "cpu", "--precision", "fp32", "--num-threads", "1", "--max-tokens", "64"]
    commands = {
        "translate": ["--checkpoint", tmp_path / "model.pt", "--spm", tmp_path / "spm.model",
                      "--input", tmp_path / "src.txt", "--output", tmp_path / "out.txt"],
        "bleu_curve": ["--run-dir", tmp_path / "run", "--spm", tmp_path / "spm.model", "--input",
                       tmp_path / "src.txt", "--ref", tmp_path / "ref.txt", "--out",
                       tmp_path / "curve.json"],
        "ppl": ["--checkpoint", tmp_path / "model.pt", "--data", tmp_path / "dev", "--out",
                tmp_path / "ppl.json"],
    }  # fmt: skip
    for command, args in commands.items():
        with pytest.raises(Resolved):
            main([command, *map(str, args), *runtime])
    assert len(seen) == 3
    assert seen[0] == seen[1] == seen[2]
    assert seen[0].decoding == DecodingRuntime(64, None, False, False)
