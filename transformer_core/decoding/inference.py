"""How a decode runs and the model it runs: a command's ``InferenceSettings`` resolved on its
device (``resolve_inference``: the device, bf16 or fp32, a compiled step or not, int8), and the
model a search decodes with: a copy of the trained model made for decoding on its device and
precision (bf16 matrices, int8 products, oneDNN-packed weights, compiled steps), the trained
model itself where none of that applies."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from transformer_core.decoding.fixed_step import FixedShapeDecoder
from transformer_core.decoding.packed import pack_linears, worth_packing
from transformer_core.decoding.quantize import check_int8_device, int8_model
from transformer_core.device import compile_choice, cpu_threads, precision_name, setup_device
from transformer_core.settings import AUTO, INFERENCE_MAX_TOKENS, InferenceSettings


@dataclass(frozen=True)
class DecodingRuntime:
    """How a decode runs, as ``resolve_inference`` resolved a command's ``InferenceSettings`` on
    its device: the source tokens of a batch, padding included; bf16 ``autocast`` or None
    (fp32); a compiled step; dynamic int8 products. None of them changes what a search finds
    beyond rounding."""

    max_tokens: int = INFERENCE_MAX_TOKENS
    autocast: torch.dtype | None = None
    compile: bool = False
    int8: bool = False


DEFAULT_RUNTIME = DecodingRuntime()  # fp32, eager, batches of INFERENCE_MAX_TOKENS


@dataclass(frozen=True)
class ResolvedInference:
    """A command's ``InferenceSettings`` resolved on this machine (``resolve_inference``): the
    ``device`` its model runs on, the ``decoding`` runtime that the decoding and scoring
    functions take whole, and ``compile_why``, the setting that decided the compile choice."""

    device: torch.device
    decoding: DecodingRuntime
    compile_why: str

    def describe(self) -> str:
        """Where and how the decode runs, the first words of its log line (threads as set)."""
        runtime = self.decoding
        precision = "int8 (dynamic)" if runtime.int8 else precision_name(runtime.autocast)
        return (
            f"decoding on {self.device} ({cpu_threads()}), precision {precision} (scores in "
            f"fp32), {'compiled' if runtime.compile else 'eager'} step ({self.compile_why})"
        )


def resolve_inference(settings: InferenceSettings, int8: bool = False) -> ResolvedInference:
    """``settings`` on this machine, the one way ``translate``, ``bleu_curve`` and ``ppl`` take
    them: --num-threads applied, --device and --precision resolved (``device.setup_device``),
    --compile decided for decoding (``device.compile_choice``). With ``int8`` (``translate
    --quantize int8``) precision ``auto`` is fp32 (activations stay fp32) and the device must
    run int8 products (``quantize.check_int8_device``)."""
    if int8 and settings.precision == AUTO:
        settings = dataclasses.replace(settings, precision="fp32")
    device, autocast = setup_device(settings)
    if int8:
        check_int8_device(device, autocast)
    compiled, why = compile_choice(device, settings.compile, "decode")
    return ResolvedInference(
        device, DecodingRuntime(settings.max_tokens, autocast, compiled, int8), why
    )


def inference_model(
    model: nn.Module, autocast: torch.dtype | None, compile: bool = False, int8: bool = False
) -> nn.Module:
    """The model to decode with under ``autocast``: for bf16, a copy whose matrices are bf16;
    with ``int8``, a copy whose matrix products are dynamic int8 (``quantize.int8_model``, CPUs,
    no autocast); with ``compile``, a copy whose decoding step is compiled. On a
    CPU, without ``int8``, the copy's matrices are also packed by oneDNN
    (``packed.pack_linears``) where that is faster (``packed.worth_packing``), fp32 included,
    compiled or not.

    Autocast casts every fp32 weight to bf16 again at every call it makes; in beam
    search, one call per layer per output token, that copying took 39% of the decoding
    time of the base model on a CPU. Casting the weights of the Linear and Embedding
    modules once gives autocast's own arithmetic (it computes those products in bf16
    anyway) without the copies. Layer norms keep fp32 weights and autocast runs them in
    fp32; the embedding lookups (tokens, and learned positions) are the only values
    rounded to bf16 earlier than under autocast alone.

    With ``compile``, the copy decodes on caches and rows of few shapes
    (``fixed_step.FixedShapeDecoder``) with its whole step compiled (``fixed_step.compile_step``).
    The encoder runs once a batch and stays eager: compiled, it cost a graph more for sources
    under 16 tokens (8 s on 2 CPU cores) for milliseconds a batch. The caller's model is left
    as it is (fp32, for training or another decode).
    """
    pack = not int8 and worth_packing(model)
    if autocast is None and not compile and not int8 and not pack:
        return model
    if int8:
        check_int8_device(next(model.parameters()).device, autocast)
        copied = int8_model(model)
    else:
        copied = copy.deepcopy(model)
    if autocast is not None:
        for module in copied.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.to(autocast)
    if pack:
        pack_linears(copied)
    if compile:
        return FixedShapeDecoder(copied, compiled=True)
    return copied
