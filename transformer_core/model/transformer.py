"""The Transformer of Vaswani et al. (2017), section 3: a post-norm encoder-decoder.

Each sub-layer is ``LayerNorm(x + Dropout(Sublayer(x)))``; there is no final
layer norm after either stack. One embedding matrix is shared by the source,
the target and the pre-softmax projection, and is multiplied by sqrt(d_model)
at the input. Dropout is applied to the embedding+position sums and to every
sub-layer output. Attention runs through torch's fused
``scaled_dot_product_attention``, except where plain matmuls were measured faster on CPUs
(``MultiHeadAttention.attend``).

Contract used by the rest of the pipeline:
``Transformer(cfg)``; ``model(src_tokens, tgt_in_tokens)`` returns logits of
shape (batch, tgt_len, vocab); padding is ``cfg.pad_id`` (right-padded); the
decoder input starts with ``cfg.bos_id``. For decoding, ``encode`` +
``init_state`` + ``decode_step`` run the decoder one token at a time with
cached keys and values, so one step costs O(t), not O(t^2); the caches are
preallocated (``PositionBuffer``), so a step allocates nothing.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_core.model.config import ModelConfig
from transformer_core.model.cpu_attention import decoding_attention, matmul_attention
from transformer_core.model.decoder_state import DecoderState, LayerCache
from transformer_core.model.dropout import Dropout

LAYER_NORM_EPS = 1e-6  # tensor2tensor's value
# On CPUs, torch's fused attention in bf16 runs one small oneDNN matrix product per sentence,
# head and block: at translation lengths thousands of calls a step, whose overhead, not their
# arithmetic, is the time. Batched matmuls (cpu_attention.matmul_attention) make one call each:
# forward and backward 12 times faster at Multi30k's shape (130 sentences of 15 tokens), 1.4 to
# 1.8 from 200 to 500 keys, about even at 782 keys (0.94 to 1.21 times as fast), where the
# weights the fused kernel never forms grow large (docs/bf16.md, bench/bench_cpu_kernels.py).
# In fp32 the fused kernel is the faster (or within noise) at almost every shape.
CPU_BF16_MATMUL_MAX_KEYS = 640


def sinusoidal_encoding(length: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...): (length, d_model)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)[:, : d_model // 2]
    return table


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Queries and keys are projected to h * d_k, values to h * d_v, independently of d_model.
    """

    def __init__(self, d_model: int, h: int, d_k: int, d_v: int):
        super().__init__()
        self.h, self.d_k, self.d_v = h, d_k, d_v
        self.w_q = nn.Linear(d_model, h * d_k)
        self.w_k = nn.Linear(d_model, h * d_k)
        self.w_v = nn.Linear(d_model, h * d_v)
        self.w_o = nn.Linear(h * d_v, d_model)

    def split_heads(self, x: Tensor, d_head: int) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.h, d_head).transpose(1, 2)  # (B, h, T, d_head)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of ``memory``: (B, h, S, d_k) and (B, h, S, d_v)."""
        return self.split_heads(self.w_k(memory), self.d_k), self.split_heads(
            self.w_v(memory), self.d_v
        )

    def attend(
        self,
        query: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        is_causal: bool = False,
        decoding: bool = False,
    ) -> Tensor:
        """Scaled dot-product attention of ``query`` (B, T, d_model) over projected k, v.

        ``mask`` is boolean, broadcastable to (B, h, T, S), True where attention is allowed.
        On CPUs plain matmuls replace SDPA where they were measured faster: a decoding step
        (``decoding``: a few queries against cached keys, ``decoding_attention``), and bf16
        (autocast) up to ``CPU_BF16_MATMUL_MAX_KEYS`` keys.
        """
        q = self.split_heads(self.w_q(query), self.d_k)  # (B, h, T, d_k)
        on_cpu = q.device.type == "cpu"
        if on_cpu and decoding:
            out = decoding_attention(q, k, v, mask)
        elif on_cpu and q.dtype == torch.bfloat16 and k.size(-2) <= CPU_BF16_MATMUL_MAX_KEYS:
            out = matmul_attention(q, k, v, mask, is_causal)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        batch, _, length, _ = out.shape  # out: (B, h, T, d_v)
        return self.w_o(out.transpose(1, 2).reshape(batch, length, self.h * self.d_v))

    def forward(
        self, query: Tensor, memory: Tensor, mask: Tensor | None = None, is_causal: bool = False
    ) -> Tensor:
        k, v = self.project_kv(memory)
        return self.attend(query, k, v, mask, is_causal)

    def attention_weights(
        self, query: Tensor, memory: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        """softmax(Q K^T / sqrt(d_k)) of every head, (B, h, T, S): the weights ``forward`` applies.

        Training and decoding never call it (fused SDPA never forms the weights); it is for
        looking into a trained model (transformer_core/figures/attention_maps.py, the paper's Figures 3-5).
        """
        q = self.split_heads(self.w_q(query), self.d_k)  # (B, h, T, d_k)
        k = self.split_heads(self.w_k(memory), self.d_k)  # (B, h, S, d_k)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.d_k**-0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        return torch.softmax(scores, dim=-1)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(F.relu(self.w_1(x)))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped as LayerNorm(x + Dropout(sublayer(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.h, cfg.d_k, cfg.d_v)
        self.feed_forward = PositionwiseFeedForward(cfg.d_model, cfg.d_ff)
        self.norm_1 = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.norm_2 = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        x = self.norm_1(x + self.dropout(self.self_attn(x, x, src_mask)))
        return self.norm_2(x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward; each post-norm residual."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.h, cfg.d_k, cfg.d_v)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.h, cfg.d_k, cfg.d_v)
        self.feed_forward = PositionwiseFeedForward(cfg.d_model, cfg.d_ff)
        self.norm_1 = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.norm_2 = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.norm_3 = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, y: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        # Right padding plus the causal mask means real positions never see padding.
        y = self.norm_1(y + self.dropout(self.self_attn(y, y, is_causal=True)))
        y = self.norm_2(y + self.dropout(self.cross_attn(y, memory, src_mask)))
        return self.norm_3(y + self.dropout(self.feed_forward(y)))

    def step(
        self,
        y: Tensor,
        cache: LayerCache,
        src_mask: Tensor,
        beam: int = 1,
        rows: Tensor | None = None,
    ) -> Tensor:
        """One decoding position ``y`` (N * beam, 1, d_model); appends its key/value to ``cache``
        after taking the cache rows ``rows`` (a pending reorder; None: none).

        The ``beam`` rows of a sentence query its encoder-decoder keys/values together,
        as ``beam`` query positions of one attention call, so those stay one copy per
        sentence instead of ``beam``.
        """
        cache.append(self.self_attn.w_k(y), self.self_attn.w_v(y), rows)
        return self.attend_and_transform(
            y, cache.self_attention(), (cache.cross_k, cache.cross_v), src_mask, beam
        )

    def attend_and_transform(
        self,
        y: Tensor,
        self_kv: tuple[Tensor, Tensor],
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        beam: int,
        self_mask: Tensor | None = None,
    ) -> Tensor:
        """The rest of ``step`` once the cache holds this position: a function of tensors alone
        (the fixed-shape step, ``decoding.fixed_step``, runs it compiled), given the layer's
        self-attention keys and values (``self_kv``) and its encoder-decoder ones
        (``cross_kv``). Decoding runs in eval mode, where dropout is the identity: it is left
        out. ``self_mask`` (broadcastable to (rows, h, 1, t)) marks the cached positions to
        attend to; None: all (the eager caches hold only written ones)."""
        (self_k, self_v), (cross_k, cross_v) = self_kv, cross_kv
        attended = self.self_attn.attend(y, self_k, self_v, self_mask, decoding=True)
        y = self.norm_1(y + attended)
        n_rows, _, d_model = y.shape
        grouped = y.view(n_rows // beam, beam, d_model)  # (N, beam, d_model)
        attended = self.cross_attn.attend(grouped, cross_k, cross_v, src_mask, decoding=True)
        y = self.norm_2(y + attended.view(n_rows, 1, d_model))
        return self.norm_3(y + self.feed_forward(y))


class Transformer(nn.Module):
    """The encoder-decoder of the paper, configured by a ``ModelConfig``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.d_model)  # shared: src, tgt, pre-softmax
        if cfg.positional == "learned":
            self.position_embedding = nn.Embedding(cfg.max_positions, cfg.d_model)
        else:
            self.register_buffer(
                "sinusoids", sinusoidal_encoding(cfg.max_positions, cfg.d_model), persistent=False
            )
        self.dropout = Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialize every weight as ``cfg.init`` says; biases zero, layer norms (1, 0).

        ``xavier`` (tensor2tensor, fairseq): Xavier-uniform projections and the shared
        embedding from N(0, d_model^-0.5), so that with the sqrt(d_model) input scale the
        embedded tokens have unit variance. ``normal`` (BERT, Marian): every weight matrix,
        the embedding included, from N(0, init_std); embedded tokens then start small
        beside the positions, and so do the first logits of the tied output projection.
        """
        normal = self.cfg.init == "normal"
        for name, param in self.named_parameters():
            if name.startswith(("embedding", "position_embedding")):
                nn.init.normal_(
                    param, mean=0.0, std=self.cfg.init_std if normal else self.cfg.d_model**-0.5
                )
            elif param.dim() > 1:
                if normal:
                    nn.init.normal_(param, mean=0.0, std=self.cfg.init_std)
                else:
                    nn.init.xavier_uniform_(param)
            elif name.endswith("bias"):
                nn.init.zeros_(param)

    # -- pieces -------------------------------------------------------------------------
    def positions(self, start: int, length: int, device: torch.device) -> Tensor:
        end = start + length
        if end > self.cfg.max_positions:
            if self.cfg.positional == "learned":
                raise ValueError(
                    f"sequence of {end} positions exceeds model.max_positions={self.cfg.max_positions} "
                    "of the learned position table"
                )
            return sinusoidal_encoding(end, self.cfg.d_model).to(device)[start:end]
        if self.cfg.positional == "learned":
            return self.position_embedding(torch.arange(start, end, device=device))
        return self.sinusoids[start:end]

    def embed(self, tokens: Tensor, start: int = 0) -> Tensor:
        """Dropout(Embedding(tokens) * sqrt(d_model) + PE): (B, T, d_model)."""
        x = self.embedding(tokens) * math.sqrt(self.cfg.d_model)
        return self.dropout(x + self.positions(start, tokens.size(1), tokens.device))

    def project(self, y: Tensor) -> Tensor:
        """Pre-softmax linear transformation, tied to the embedding matrix."""
        return F.linear(y, self.embedding.weight)

    def padding_mask(self, src_tokens: Tensor) -> Tensor:
        return (src_tokens != self.cfg.pad_id)[:, None, None, :]  # (B, 1, 1, S), True = attend

    def encode(self, src_tokens: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder output (B, S, d_model) and the source padding mask (B, 1, 1, S)."""
        src_mask = self.padding_mask(src_tokens)
        x = self.embed(src_tokens)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x, src_mask

    def decode(self, tgt_in_tokens: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        """Logits (B, T, vocab) of the whole target prefix at once (training, scoring)."""
        y = self.embed(tgt_in_tokens)
        for layer in self.decoder_layers:
            y = layer(y, memory, src_mask)
        return self.project(y)

    def forward(self, src_tokens: Tensor, tgt_in_tokens: Tensor) -> Tensor:
        memory, src_mask = self.encode(src_tokens)
        return self.decode(tgt_in_tokens, memory, src_mask)

    # -- incremental decoding -----------------------------------------------------------
    def init_state(
        self, memory: Tensor, src_mask: Tensor, beam: int = 1, capacity: int = 64
    ) -> DecoderState:
        """State for ``beam`` decoder rows per sentence of ``memory`` (N, S, d_model).

        The encoder-decoder keys/values are computed once per sentence; the
        self-attention caches start empty, with room for ``capacity`` positions (the
        longest output the search allows; they grow if it is exceeded) and grow in rows if
        ``DecoderState.reorder`` asks for more (beam search starts with one row a sentence).
        """
        rows = memory.size(0) * beam
        layers = []
        for layer in self.decoder_layers:
            attn = layer.self_attn
            # Caches of the dtype the projections produce (bf16 under autocast), on memory's device.
            layers.append(
                LayerCache.empty(
                    rows, attn.h, attn.d_k, attn.d_v, capacity, *layer.cross_attn.project_kv(memory)
                )
            )
        return DecoderState(layers=layers, src_mask=src_mask, beam=beam)

    def decode_step(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """Logits (rows, vocab) for the position after ``tokens`` (rows,), the last inputs."""
        y = self.embed(tokens[:, None], start=state.position)
        for layer, cache in zip(self.decoder_layers, state.layers, strict=True):
            y = layer.step(y, cache, state.src_mask, state.beam, state.pending_rows)
        state.position += 1
        state.pending_rows = None
        return self.project(y[:, 0])


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_count(cfg: ModelConfig) -> int:
    """Exact parameter count of ``Transformer(cfg)``, built on the meta device (no memory, no time)."""
    with torch.device("meta"):
        return count_parameters(Transformer(cfg))
