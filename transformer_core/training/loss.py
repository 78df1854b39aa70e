"""Label-smoothed cross-entropy (paper section 5.4, eps_ls = 0.1).

The smoothed target of a token is ``q = (1 - eps) * onehot(y) + eps / V``: the
eps mass is spread uniformly over the whole vocabulary of V entries, as in
Szegedy et al. (2016), the label smoothing the paper cites. The loss of one
token is then

    -sum_k q_k log p_k = (1 - eps) * (-log p_y) + eps * mean_k(-log p_k),

which is what ``torch.nn.functional.cross_entropy(label_smoothing=eps)``
computes. (tensor2tensor spreads eps over the V - 1 wrong entries and subtracts
the constant entropy of q; for V = 37000 the gradients differ by about 1/V.)

The loss is computed together with the pre-softmax projection (see
``projected_label_smoothed_loss``). Padding positions are ignored. The
functions return *sums* over tokens so
that callers can normalize once per optimizer step by the global number of
target tokens (the gradient then equals that of one big batch, however the
tokens are split over micro-batches and devices). The unsmoothed NLL is
returned beside it: perplexity is exp(NLL per token), without smoothing. ``LossModel`` is
the Transformer and this loss in one forward, the module training wraps in DDP.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from transformer_core.model.transformer import Transformer


class LossSums(NamedTuple):
    """Sums over the non-pad target tokens of one batch."""

    loss: Tensor  # label-smoothed cross-entropy, summed (what backward sees)
    nll: Tensor  # plain negative log-likelihood, summed (for perplexity)
    tokens: int  # number of non-pad target tokens


def _chunk_gradient(z: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor, Tensor]:
    """One chunk of low-precision logits ``z`` (rows, V) against ``target`` (rows, 1): the
    rows' summed -log p_y and summed logsumexp, in fp32, and d loss / d z without its uniform
    part, softmax(z) - (1 - eps) onehot(y), in ``z``'s dtype. Compiled (``_fused_chunk``), a
    reduction and one pass that reads the logits and writes the gradient, where eager code
    copies them into fp32 and passes over that copy three times more."""
    logits = z.float()
    lse = torch.logsumexp(logits, dim=-1, keepdim=True)
    log_p_target = logits.gather(1, target) - lse
    columns = torch.arange(z.size(1), device=z.device)
    grad = torch.exp(logits - lse) - (1.0 - epsilon) * (columns == target)
    return -log_p_target.sum(), lse.sum(), grad.to(z.dtype)


@functools.cache
def _fused_chunk():
    """``_chunk_gradient`` compiled once for any number of rows, never as a CUDA graph (the
    last chunk's rows change from batch to batch, and a graph would be recorded for each)."""
    return torch.compile(_chunk_gradient, dynamic=True, options={"triton.cudagraphs": False})


class _ProjectedSmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of ``hidden @ weight.T``, fused and chunked over tokens.

    For ``rows`` tokens at a time: the logits z, their log-softmax, and at once the
    gradient d loss / d z = softmax(z) - q, pushed through the projection into
    d hidden and d weight (Liger-Kernel's fused linear cross-entropy). The (N, V)
    logits never exist whole. Backward only scales the stored gradients.

    The logits are passed over as few times as eager mode allows: one log-softmax and one
    exp, in place in an fp32 buffer that every chunk reuses (under autocast, the bf16
    logits are copied into it first, and the gradient is cast back to bf16 once for the
    two products that use it).
    What else the loss needs of a row comes from its target entry and from
    sum_k z_k = h . sum_k W_k, a product with the weight's column sum; and the
    uniform part of q, eps / V on every entry, enters the gradients as that same
    column sum (d hidden) and the column sum of the hidden states (d weight),
    instead of a pass over the logits.
    """

    @staticmethod
    def forward(
        ctx,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        epsilon: float,
        rows: int,
        fused: bool,
    ) -> tuple[Tensor, Tensor]:
        n, vocab = hidden.size(0), weight.size(0)
        need_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        dtype = torch.promote_types(weight.dtype, torch.float32)  # fp32 math for bf16 weights
        autocast = torch.is_autocast_enabled(hidden.device.type)
        # bf16 products under autocast (each chunk's hidden states cast once; the weight's
        # cast is autocast's, cached for the step) and with bf16 weights; fp32 buffers reused
        # by every chunk with fp32 weights.
        low = torch.get_autocast_dtype(hidden.device.type) if autocast else None
        low = low or (weight.dtype if weight.dtype != dtype else None)
        plain = low is None and hidden.dtype == weight.dtype == dtype
        fused = fused and need_grad and low is not None
        column_sum = weight.sum(0, dtype=dtype)  # sum_k W_k: (d,)
        nll = torch.zeros((), dtype=dtype, device=hidden.device)
        lse_sum = torch.zeros((), dtype=dtype, device=hidden.device)  # sum over rows of logsumexp
        grad_hidden = torch.empty_like(hidden) if need_grad else None
        grad_weight = torch.zeros_like(weight, dtype=dtype) if need_grad else None
        width = min(rows, n)
        # One fp32 buffer serves every chunk: the log-softmax and the exp run in place there
        # (fresh (rows, V) tensors cost page faults on a CPU, and exp into bf16 is slow there).
        buffer = (
            hidden.new_empty(width, vocab, dtype=dtype) if (plain or low) and not fused else None
        )
        grad_low = (
            hidden.new_empty(width, vocab, dtype=low) if need_grad and low and not fused else None
        )
        for start in range(0, n, rows):
            h, t = hidden[start : start + rows], target[start : start + rows, None]
            if fused:  # the compiled chunk: the low-precision logits are read twice, no more
                h = h.to(low)
                chunk_nll, chunk_lse, grad = _fused_chunk()(F.linear(h, weight), t, epsilon)
                nll += chunk_nll
                lse_sum += chunk_lse
                grad_hidden[start : start + rows] = grad @ weight
                grad_weight += grad.t() @ h.to(grad.dtype)
                continue
            if low is not None:
                h = h.to(low)  # once for the chunk's two products
                z = F.linear(h, weight)  # (rows, V) bf16
            elif plain:
                z = torch.mm(h, weight.t(), out=buffer[: h.size(0)])
            else:
                z = F.linear(h, weight)
            z_target = z.gather(1, t).to(dtype)  # (rows, 1), before the log-softmax overwrites z
            if buffer is None:
                log_p = torch.log_softmax(z, dim=-1, dtype=dtype)
            else:  # in place, in fp32 (a copy of the bf16 logits under autocast)
                log_p = z if plain else buffer[: h.size(0)].copy_(z)
                torch.log_softmax(log_p, dim=-1, out=log_p)
            log_p_target = log_p.gather(1, t)
            nll -= log_p_target.sum()
            lse_sum += (z_target - log_p_target).sum()  # lse = z_y - log p_y
            if need_grad:
                # softmax - (1 - eps) onehot(y); the eps / V on every entry is added below.
                grad = log_p.exp_()
                grad.scatter_(1, t, log_p_target.exp() + (epsilon - 1.0))
                if low is not None:
                    grad = grad_low[: h.size(0)].copy_(grad)  # cast once for both products
                if plain:
                    torch.mm(grad, weight, out=grad_hidden[start : start + rows])
                    grad_weight.addmm_(grad.t(), h)
                else:
                    grad_hidden[start : start + rows] = grad @ weight
                    grad_weight += grad.t() @ h.to(grad.dtype)
        # sum over rows of sum_k log p_k = sum_k z_k - V lse, where the rows' sum_k z_k is
        # (sum of the hidden states) . column_sum (elementwise: autocast leaves it in fp32).
        hidden_sum = hidden.sum(0, dtype=dtype)
        log_prob_sum = (hidden_sum * column_sum).sum() - vocab * lse_sum
        if need_grad and epsilon:
            grad_hidden.sub_((epsilon / vocab) * column_sum.to(grad_hidden.dtype))
            grad_weight.sub_((epsilon / vocab) * hidden_sum)
        loss = (1.0 - epsilon) * nll - (epsilon / vocab) * log_prob_sum if epsilon else nll.clone()
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden.mul_(grad_loss), grad_weight.mul_(grad_loss), *[None] * 4


# Logits per chunk: 16M floats (64 MiB in fp32) on a CPU; 128M on a GPU (a 12,500-token
# micro-batch of a 37,000-piece vocabulary in 4 chunks: 0.5 GiB of fp32 log-probabilities).
CHUNK_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 27}


def projected_label_smoothed_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    pad_id: int = 0,
    target_index: Tensor | None = None,
    fused: bool = False,
) -> LossSums:
    """Summed label-smoothed loss and NLL of logits ``hidden @ weight.T`` against ``target``.

    ``hidden`` (..., d) are the decoder outputs, ``weight`` (V, d) the tied
    pre-softmax projection, ``target`` (...) the token ids; pad positions are
    dropped before the projection: those not in ``target_index`` (the flattened
    positions of the non-pad targets, which the host knows from the batch), or,
    without it, those equal to ``pad_id`` (which reads ``target`` back: a GPU
    synchronization). Log-probabilities are fp32 even under bf16 autocast. ``fused``: under
    autocast, each chunk's softmax, loss and gradient are one compiled function
    (``_fused_chunk``) rather than eager passes over an fp32 copy of the logits.
    """
    hidden = hidden.reshape(-1, hidden.size(-1))
    target = target.reshape(-1)
    if target_index is not None:
        hidden, target = hidden.index_select(0, target_index), target.index_select(0, target_index)
    else:
        keep = target != pad_id
        if not bool(keep.all()):
            hidden, target = hidden[keep], target[keep]
    rows = max(1, CHUNK_ELEMENTS.get(hidden.device.type, 1 << 24) // weight.size(0))
    if not torch.is_grad_enabled():  # no gradient to compute (the Function sees requires_grad)
        hidden, weight = hidden.detach(), weight.detach()
    loss, nll = _ProjectedSmoothedCrossEntropy.apply(
        hidden, weight, target, float(epsilon), rows, fused
    )
    return LossSums(loss, nll, target.numel())


# Graphs a static compilation keeps: more than the ladder's widths up to 4,096 tokens (41).
STATIC_GRAPHS = 64


def compile_options(model: nn.Module, static: bool) -> dict[str, bool]:
    """Inductor's options for the stacks of ``model``: CUDA graphs where its weights are on a
    GPU and its shapes static (a graph of dynamic shapes would be recorded for each)."""
    return {"triton.cudagraphs": static and next(model.parameters()).is_cuda}


class LossModel(nn.Module):
    """The Transformer and its loss in one forward (what DDP wraps).

    The pre-softmax projection (tied to the embedding, as ``Transformer.project``),
    the largest matrix multiplication for a big vocabulary, runs fused with the
    loss and only on the non-pad target positions.
    """

    def __init__(self, model: Transformer, compile: bool = False, static: bool = False):
        super().__init__()
        self.model = model
        # torch.compile of the encoder and decoder stacks (the loss's chunk loop stays eager: it
        # depends on the number of tokens; on GPUs each chunk's softmax and gradient compile).
        # Dynamic shapes: one graph for every batch; ``static``: a graph per shape, for
        # micro-batches of fixed shapes (data.shapes), up to STATIC_GRAPHS of them, in training
        # (scoring in eval mode stays eager), each recorded on a GPU as a CUDA graph
        # (inductor's, forward and backward), so that the host launches a shape's kernels at once.
        self.compiled, self.static = compile, compile and static
        self.decoder_states = self._decoder_states
        options = compile_options(model, self.static)
        self.cuda_graphs = options["triton.cudagraphs"]
        if compile:
            self.decoder_states = torch.compile(
                self._decoder_states, dynamic=not static, options=options
            )

    def _decoder_states(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """The last decoder layer's output (B, T, d_model): ``Transformer.decode`` without the
        projection, which is fused into the loss."""
        model = self.model
        memory, src_mask = model.encode(src)
        y = model.embed(tgt_in)
        for layer in model.decoder_layers:
            y = layer(y, memory, src_mask)
        return y

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        tgt_out: Tensor,
        epsilon: float,
        target_index: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Summed label-smoothed loss and NLL; ``target_index``: ``Batch.target_index``."""
        model = self.model
        if not self.static:
            hidden = self.decoder_states(src, tgt_in)
        elif model.training:
            with torch._dynamo.config.patch(recompile_limit=STATIC_GRAPHS):
                hidden = self.decoder_states(src, tgt_in)
        else:  # scoring batches of any shape (dev): eager rather than a graph per shape
            hidden = self._decoder_states(src, tgt_in)
        out = projected_label_smoothed_loss(
            hidden,
            model.embedding.weight,
            tgt_out,
            epsilon,
            model.cfg.pad_id,
            target_index,
            fused=self.compiled and hidden.is_cuda,
        )
        return out.loss, out.nll
