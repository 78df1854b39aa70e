"""bench/profile_command.py runs a command under torch.profiler and writes where its time went."""

import json
from types import SimpleNamespace

import torch

from bench import profile_command
from bench.lib import profiles


def test_a_profiled_command_writes_its_host_time_and_status(tmp_path, capsys):
    out = tmp_path / "profile.json"
    assert profile_command.main(["--out", str(out), "--", "params", "--json"]) == 0
    result = json.loads(out.read_text())
    assert result["command"] == ["params", "--json"] and result["status"] == 0
    assert result["top_host_operators"] and all(
        row["calls"] > 0 for row in result["top_host_operators"]
    )
    assert result["kernels"] is None  # no GPU: no kernels to count
    assert '"base"' in capsys.readouterr().out  # the command's own output is left as it is


# Kernel names from the H100's training profiles (bench/results/h100/train_fixed_shapes_*.json).
H100_KERNELS = {
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT": "matrix product",
    "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<": (
        "attention"
    ),
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<6": (
        "attention"
    ),
    "triton_per_fused__to_copy_add_native_dropout_native_layer_norm_native_layer_norm_backward_": (
        "compiled (inductor)"
    ),
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::na": (
        "softmax"
    ),
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::Tenso": (
        "copy or cast"
    ),
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous n": (
        "optimizer"
    ),
    "void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel_cuda(at::TensorIt": (
        "other elementwise or reduction"
    ),
}


def test_kernels_are_sorted_by_the_work_their_names_say():
    assert {name: profiles.kernel_kind(name) for name in H100_KERNELS} == H100_KERNELS


def test_the_kernel_summary_adds_up_kinds_and_leaves_annotations_out():
    """Two steps: a product of 3 ms and a copy of 1 ms each, 1 ms apart; the optimizer's
    annotation on the GPU's timeline spans them all and is no kernel."""
    cuda = torch.autograd.DeviceType.CUDA

    def event(name: str, start: float, end: float, annotation: bool = False) -> SimpleNamespace:
        span = SimpleNamespace(start=start * 1000, end=end * 1000)  # the profiler's microseconds
        return SimpleNamespace(
            name=name, device_type=cuda, time_range=span, is_user_annotation=annotation
        )

    events = [event("Optimizer.step#Adam.step", 0, 10, annotation=True)]
    for step in (0, 5):
        events += [
            event("nvjet_sm90_tst_NNT", step, step + 3),
            event("direct_copy", step + 4, step + 5),
        ]
    summary = profiles.kernel_summary(events, steps=2)
    assert summary["kernels"] == 4 and summary["span_ms"] == 10.0 and summary["gpu_busy_ms"] == 8.0
    assert summary["by_kind"] == {
        "matrix product": {"ms_per_step": 3.0, "share": 0.75},
        "copy or cast": {"ms_per_step": 1.0, "share": 0.25},
    }


def test_the_host_time_of_training_steps_by_python_function(tmp_path):
    """Two real Trainer steps on the CPU under the profiler with Python traced: each step's
    ``train_step`` once, inclusive of the loss model it calls; the batch prefetch thread's
    functions left out."""
    from torch.profiler import ProfilerActivity, profile

    from bench.lib.shapes import SHAPES
    from bench.lib.train_runners import Ours, synthetic_corpus, timed, train_settings
    from transformer_core.model.config import model_config

    cfg = model_config("base", **SHAPES["tiny"])
    dataset = synthetic_corpus(tmp_path / "c", cfg.vocab_size, 200)
    ours = Ours(cfg, dataset, torch.device("cpu"), train_settings("fp32", 500, 500))
    try:
        timed(ours, 1, torch.device("cpu"))
        with profile(activities=[ProfilerActivity.CPU], with_stack=True) as traced:
            timed(ours, 2, torch.device("cpu"))
    finally:
        ours.trainer.close()
    rows = {row["name"].split(": ")[-1]: row for row in profiles.python_host_time(
        traced.events(), steps=2, top=1000
    )}  # fmt: skip
    step, forward = rows["train_step"], rows["forward"]
    assert step["calls_per_step"] == 1.0 and 0 < forward["ms_per_step"] <= step["ms_per_step"]
    assert "collate" not in rows  # the prefetch thread's
