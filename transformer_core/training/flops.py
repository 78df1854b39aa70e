"""Training cost two ways (docs/recipe.md, Model and training): the paper's method and an analytic FLOPs count.

1. The paper's method (Table 2, footnote 5): training time x number of GPUs x
   the sustained single-precision FLOPS of one GPU. ``DEVICES`` holds those
   FLOPS. K80, K40, M40 and P100 carry the paper's own values. Newer GPUs carry
   the vendor datasheet's FP32 number *without* tensor cores, so that a cost
   measured on them is comparable with the paper's (which predates tensor cores).
   A device not in the table (any CPU) gets no cost, and a note says why.

2. An analytic count of the model's floating-point operations over the tokens
   actually trained on: every matrix multiplication of the forward pass, counted
   as 2 FLOPs per multiply-add, times 3 for training (the backward pass costs
   twice the forward: one matmul for the input gradient and one for the weight
   gradient; Kaplan et al. 2020). Per token, with d = d_model, a = h * d_k,
   b = h * d_v, V = vocab_size, N_enc / N_dec layers:

   - encoder layer, per source token: Q, K, V, output projections
     2d(2a + b) + 2bd, feed-forward 4 d d_ff;
   - decoder layer, per target token: self-attention projections 2d(2a + b) + 2bd,
     encoder-decoder query and output projections 2da + 2bd, feed-forward 4 d d_ff;
     and per *source* token the encoder-decoder keys and values 2d(a + b);
   - output projection (tied embedding), per target token: 2 d V;
   - attention itself, per pair of positions that may attend: 2a (scores) + 2b
     (weighted values). Per sentence with S source and T target positions:
     S^2 encoder pairs, T(T+1)/2 causal decoder pairs (only the allowed ones),
     S*T encoder-decoder pairs, times the number of layers.

   Positions include EOS (source) and BOS (decoder input), as the model sees
   them; padding is not counted (it is work, but not the model's). Left out:
   layer norms, softmaxes, residual additions, dropout, the embedding lookup,
   the loss and the optimizer, each O(d) per token: below 1% for the paper's
   shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from transformer_core.data.token_counts import TokenCounts
from transformer_core.model.config import ModelConfig, model_config
from transformer_core.paper import PAPER_TRAINING_RUNS


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator: the FLOPS the paper's cost method uses, and the bf16 peak for MFU."""

    name: str
    fp32_tflops: float  # sustained single precision, no tensor cores (the paper's measure)
    bf16_tflops: (
        float | None
    )  # dense bf16 tensor-core peak (for model FLOPs utilization); None: no bf16
    source: str


DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec("K80", 2.8, None, "the paper (Table 2, footnote 5)"),
    DeviceSpec("K40", 3.7, None, "the paper (Table 2, footnote 5)"),
    DeviceSpec("M40", 6.0, None, "the paper (Table 2, footnote 5)"),
    DeviceSpec(
        "P100", 9.5, None, "the paper (Table 2, footnote 5); datasheet: 9.3 PCIe, 10.6 SXM2"
    ),
    DeviceSpec("V100-PCIE", 14.0, None, "NVIDIA V100 datasheet, FP32, PCIe"),
    DeviceSpec("V100", 15.7, None, "NVIDIA V100 datasheet, FP32, SXM2 (no bf16 support)"),
    DeviceSpec(
        "A100", 19.5, 312.0, "NVIDIA A100 datasheet, FP32 (non-tensor); bf16 tensor dense 312"
    ),
    DeviceSpec("H100 PCIe", 51.0, 756.0, "NVIDIA H100 datasheet, FP32 PCIe; bf16 tensor dense 756"),
    DeviceSpec("H100 NVL", 60.0, 835.0, "NVIDIA H100 datasheet, FP32 NVL; bf16 tensor dense 835"),
    DeviceSpec("H100", 67.0, 989.0, "NVIDIA H100 datasheet, FP32 SXM5; bf16 tensor dense 989"),
    DeviceSpec("H200 NVL", 60.0, 835.0, "NVIDIA H200 datasheet, FP32 NVL; bf16 tensor dense 835"),
    DeviceSpec(
        "H200",
        67.0,
        989.0,
        "NVIDIA H200 datasheet, FP32 SXM (same GH100 compute as H100 SXM); bf16 tensor dense 989",
    ),
)


def device_spec(device_name: str) -> DeviceSpec | None:
    """The table entry for a device name as ``torch.cuda.get_device_name`` spells it, or None.

    Variants are listed before their family, so "Tesla V100-PCIE-16GB" finds
    V100-PCIE and "NVIDIA H100 80GB HBM3" (SXM) finds H100.
    """
    normalized = device_name.upper()
    for spec in DEVICES:
        pattern = r"(?<![A-Z0-9])" + re.escape(spec.name.upper()).replace(r"\ ", r"[\s_-]+")
        if re.search(pattern + r"(?![0-9])", normalized):
            return spec
    return None


def paper_method_cost(hours: float, devices: int, device_name: str) -> dict:
    """Training time x devices x sustained FLOPS; ``flops`` is None (with a note) off the table."""
    spec = device_spec(device_name)
    if spec is None:
        return {
            "flops": None,
            "device": device_name,
            "tflops_per_device": None,
            "note": f"{device_name!r} is not in the table of sustained FLOPS "
            "(transformer_core.training.flops.DEVICES); the paper's method needs one",
        }
    flops = hours * 3600.0 * devices * spec.fp32_tflops * 1e12
    return {
        "flops": flops,
        "device": spec.name,
        "tflops_per_device": spec.fp32_tflops,
        "note": spec.source,
    }


def forward_flops(cfg: ModelConfig, counts: TokenCounts) -> float:
    """FLOPs of one forward pass over ``counts`` (the formula in the module docstring)."""
    d, a, b, ff = cfg.d_model, cfg.h * cfg.d_k, cfg.h * cfg.d_v, cfg.d_ff
    self_proj = 2 * d * (2 * a + b) + 2 * b * d
    pair = 2 * a + 2 * b
    encoder = cfg.encoder_layers * (
        counts.src_tokens * (self_proj + 4 * d * ff) + counts.src_sq * pair
    )
    decoder = cfg.decoder_layers * (
        counts.tgt_tokens * (self_proj + 2 * d * a + 2 * b * d + 4 * d * ff)
        + counts.src_tokens * 2 * d * (a + b)
        + (counts.tgt_causal + counts.src_tgt) * pair
    )
    output = counts.tgt_tokens * 2 * d * cfg.vocab_size
    return float(encoder + decoder + output)


def training_flops(cfg: ModelConfig, counts: TokenCounts) -> float:
    """Forward plus backward (twice the forward): 3x ``forward_flops``."""
    return 3.0 * forward_flops(cfg, counts)


# The paper's batch (section 5.1): about 25000 source and 25000 target tokens per step.
PAPER_TOKENS_PER_STEP = 25_000
# Assumed positions per sentence for the paper's runs, where only token totals are known:
# our estimate for WMT14 EN-DE in a 37000 word-piece vocabulary. The attention terms it
# feeds are about 2% of the base model's total, so a wrong guess barely moves the count.
PAPER_MEAN_LENGTH = 30.0


def paper_run_costs(vocab_size: int = 37000, mean_length: float = PAPER_MEAN_LENGTH) -> list[dict]:
    """Both cost measures for the paper's base and big runs (8 P100 GPUs, 12 h and 84 h)."""
    rows = []
    for name, run in PAPER_TRAINING_RUNS.items():
        tokens = run["steps"] * PAPER_TOKENS_PER_STEP
        counts = TokenCounts.uniform(tokens, tokens, mean_length)
        cfg = model_config(name, vocab_size=vocab_size)
        paper = paper_method_cost(run["hours"], run["devices"], run["device"])
        rows.append(
            {
                "run": f"paper {name}",
                "hours": run["hours"],
                "devices": run["devices"],
                "device": run["device"],
                "steps": run["steps"],
                "tokens_tgt": tokens,
                "flops_paper_method": paper["flops"],
                "flops_analytic": training_flops(cfg, counts),
                "note": f"analytic count assumes {PAPER_TOKENS_PER_STEP} target and source tokens per step "
                f"and {mean_length:g} positions per sentence; vocabulary {vocab_size}",
            }
        )
    return rows


def summary_costs(summary: dict, where: str = "summary") -> dict:
    """Both cost measures for a finished training run, from its summary.json."""
    from transformer_core.errors import UserError

    try:
        cfg = ModelConfig.from_dict(summary["model_config"], where=f"{where}:model_config")
        counts = TokenCounts(**summary["token_counts"])
        hours = float(summary["wall_seconds"]) / 3600.0
        devices, device = int(summary["devices"]), str(summary["device"])
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{where} is not a training summary (missing or bad field: {err})") from err
    paper = paper_method_cost(hours, devices, device)
    return {
        "run": where,
        "hours": hours,
        "devices": devices,
        "device": device,
        "steps": summary.get("steps"),
        "tokens_tgt": counts.tgt_tokens,
        "flops_paper_method": paper["flops"],
        "flops_analytic": training_flops(cfg, counts),
        "note": paper["note"] if paper["flops"] is None else "",
    }
