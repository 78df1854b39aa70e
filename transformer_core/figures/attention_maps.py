"""Encoder self-attention of a trained model on one sentence, and the heads worth showing.

The paper's Figures 3-5 show the encoder self-attention of layer 5 of 6 on two example
sentences. ``encoder_attention`` runs the encoder once with a forward pre-hook on each
layer's self-attention that records ``MultiHeadAttention.attention_weights`` of the
layer's own input: the model's normal path (fused SDPA, which never forms the weights) is
untouched, and nothing is recorded outside this function.

The paper picked its heads by eye; here each figure's heads follow a stated rule
(``pick_heads``) so that any model's figures are made the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_core.errors import UserError
from transformer_core.model.transformer import Transformer

WORD_START = "\u2581"  # sentencepiece's mark of a piece that starts a word
EOS_LABEL = "<EOS>"  # as the paper's figures write it


@dataclass(frozen=True)
class SentenceAttention:
    """One layer's self-attention on one sentence: ``weights[head, query, key]``."""

    tokens: list[str]  # the pieces, then <EOS>
    weights: Tensor  # (h, T, T), rows sum to 1
    layer: int  # 1-based, as the paper counts
    layers: int

    def word_position(self, word: str) -> int:
        """The position of the first piece of ``word`` (its first occurrence)."""
        for i, token in enumerate(self.tokens):
            if token.startswith(WORD_START) and token[len(WORD_START) :] == word:
                return i
        # A word split into pieces: the piece that starts it.
        for i, token in enumerate(self.tokens):
            rest = "".join(t.removeprefix(WORD_START) for t in self.tokens[i:])
            if token.startswith(WORD_START) and rest.startswith(word):
                return i
        raise UserError(
            f"the word {word!r} is not in the sentence's pieces: {' '.join(self.tokens)}"
        )


def figure_layer(layers: int) -> int:
    """The paper's layer 5 of 6, or the model's last layer when it has fewer than 6 (1-based)."""
    return min(5, layers)


@torch.inference_mode()
def encoder_attention(
    model: Transformer, ids: list[int], pieces: list[str], layer: int
) -> SentenceAttention:
    """Self-attention weights of encoder ``layer`` (1-based) on one sentence of piece ``ids``.

    The sentence is encoded as translation encodes it: its pieces, then EOS.
    """
    layers = len(model.encoder_layers)
    if not 1 <= layer <= layers:
        raise UserError(f"layer {layer} does not exist: the encoder has {layers} layers")
    model = model.eval()
    src = torch.tensor([[*ids, model.cfg.eos_id]], device=next(model.parameters()).device)
    recorded: list[Tensor] = []

    def record(module, args):
        query, memory, mask = args
        recorded.append(module.attention_weights(query, memory, mask)[0].float().cpu())

    hook = model.encoder_layers[layer - 1].self_attn.register_forward_pre_hook(record)
    try:
        model.encode(src)
    finally:
        hook.remove()
    return SentenceAttention([*pieces, EOS_LABEL], recorded[0], layer, layers)


def entropy(weights: Tensor) -> Tensor:
    """Entropy (nats) of each attention distribution, (..., T): low means sharp."""
    return -(weights * weights.clamp_min(1e-12).log()).sum(-1)


def pick_heads(attention: SentenceAttention, word: str | None, count: int) -> list[int]:
    """The ``count`` sharpest heads: lowest entropy of the attention from ``word``, or, for
    no word, lowest mean entropy over every position (the most structured patterns)."""
    if word is None:
        sharpness = entropy(attention.weights).mean(-1)
    else:
        sharpness = entropy(attention.weights[:, attention.word_position(word)])
    return sharpness.argsort()[:count].tolist()
