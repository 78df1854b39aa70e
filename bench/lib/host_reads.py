"""What a step asks of the host, counted on a CPU: the operators whose result depends on values the
host must read first (on a GPU, a synchronization each), the copies to the host, and each
one's call site in the package."""

from __future__ import annotations

import contextlib
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import transformer_core
from transformer_core.model import transformer as model_module

PACKAGE = Path(transformer_core.__file__).resolve().parent

# Operators whose result depends on tensor values the host must read first.
VALUE_READS = {
    "_local_scalar_dense",
    "nonzero",
    "is_nonzero",
    "masked_select",
    "equal",
    "unique",
    "_unique",
    "_unique2",
    "unique_consecutive",
    "unique_dim",
}
COPY_METHODS = ("tolist", "cpu", "numpy")


def call_site() -> str:
    """``file:line function`` of the innermost frame of the package (or of this benchmark)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(PACKAGE):
            return f"{path.relative_to(PACKAGE.parent)}:{frame.lineno} {frame.name}"
    return "bench"


class HostOverhead(TorchDispatchMode):
    """Counts dispatched operators, host reads (with call sites), bf16 casts and logit passes."""

    def __init__(self, weights: set[int], vocab_size: int, logit_rows: int):
        super().__init__()
        self.weights, self.vocab_size = weights, vocab_size
        self.logit_numel = vocab_size * logit_rows  # a tensor this large with V columns is logits
        self.calls = 0
        self.ops: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.casts = self.weight_casts = 0
        self.logit_ops: Counter[str] = Counter()
        self.attention_shapes: list[tuple] = []

    def read(self, what: str) -> None:
        self.reads[f"{what} @ {call_site()}"] += 1

    def _is_logits(self, t: object) -> bool:
        return (
            isinstance(t, torch.Tensor)
            and t.dim() == 2
            and t.size(-1) == self.vocab_size
            and t.numel() >= self.logit_numel
        )

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        self.calls += 1
        self.ops[name] += 1
        if name in VALUE_READS:
            self.read(name)
        elif name == "index" and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or [])
        ):
            self.read("boolean-mask index")
        if name == "_to_copy" and kwargs.get("dtype") == torch.bfloat16:
            self.casts += 1
            self.weight_casts += args[0].data_ptr() in self.weights
        out = func(*args, **kwargs)
        touched = [*args, *(out if isinstance(out, (tuple, list)) else [out])]
        if any(self._is_logits(t) for t in touched):
            self.logit_ops[name] += 1
        return out


@contextlib.contextmanager
def counting(weights: set[int], vocab_size: int, logit_rows: int) -> Iterator[HostOverhead]:
    """``HostOverhead`` active, with ``.tolist()``/``.cpu()``/``.numpy()`` counted as host reads
    and every attention call's (query, key) shapes recorded. (``.to(device)`` is left out: on a
    CPU a copy to the host and one to the device look the same.)"""
    mode = HostOverhead(weights, vocab_size, logit_rows)
    originals = {name: getattr(torch.Tensor, name) for name in COPY_METHODS}

    def copy_out(name: str) -> Callable:
        def method(self, *args, **kwargs):
            mode.read(f".{name}()")
            return originals[name](self, *args, **kwargs)

        return method

    sdpa, matmul_attention = F.scaled_dot_product_attention, model_module.matmul_attention
    decoding_attention = model_module.decoding_attention

    def recorded(attend: Callable) -> Callable:
        def attention(q, k, v, *args, **kwargs):
            mode.attention_shapes.append((tuple(q.shape), tuple(k.shape)))
            return attend(q, k, v, *args, **kwargs)

        return attention

    for name in COPY_METHODS:
        setattr(torch.Tensor, name, copy_out(name))
    F.scaled_dot_product_attention = recorded(sdpa)
    model_module.matmul_attention = recorded(matmul_attention)
    model_module.decoding_attention = recorded(decoding_attention)
    try:
        with mode:
            yield mode
    finally:
        for name, method in originals.items():
            setattr(torch.Tensor, name, method)
        F.scaled_dot_product_attention = sdpa
        model_module.matmul_attention = matmul_attention
        model_module.decoding_attention = decoding_attention


def per(counter: Counter, n: int) -> dict[str, float]:
    return {key: round(value / n, 2) for key, value in counter.most_common()}
