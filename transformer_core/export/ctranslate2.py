"""Exporting a trained model to CTranslate2, the engine people serve Transformer MT models with.

The export is exact: CTranslate2's ``TransformerSpec`` describes the same post-norm
network, weight for weight (tests/commands/test_export.py decodes both and compares tokens).
What each part of ``Transformer`` becomes:

- **Embeddings.** The one shared matrix goes to the encoder's and the decoder's
  embeddings and to the output projection (no bias); both stacks scale it by
  sqrt(d_model) (``scale_embeddings``). Positions: the model's own table (sinusoids
  from position 0, sin and cos interleaved, or the learned one) goes in
  ``position_encodings``; CTranslate2's built-in table has another layout.
- **Attention.** Self-attention's Q, K and V projections are fused into
  ``linear[0]`` and W^O is ``linear[1]``; encoder-decoder attention has Q in
  ``linear[0]``, K and V fused in ``linear[1]``, W^O in ``linear[2]``.
- **Layer norms and feed-forward.** Each sub-layer's post-norm (its epsilon in the
  config) is that sub-layer's ``layer_norm``; W_1 and W_2 are ``linear_0`` and ``linear_1``.
- **Vocabulary.** The sentencepiece pieces, in id order, are both vocabularies;
  the decoder starts from ``<s>`` and the source ends with ``</s>`` (added by
  CTranslate2, ``add_source_eos``).

Decoding the export like ``translate`` needs two options on CTranslate2's side:
suppress ``<pad>`` and ``<s>`` (``suppress_sequences``), which our search never
generates, and know that its ``length_penalty`` divides by |Y|^alpha, EOS not
counted, where the paper (and ``search.length_penalty``) divides by GNMT's
((5 + |Y|) / 6)^alpha: the same alpha ranks hypotheses differently.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import torch

from transformer_core.errors import UserError
from transformer_core.export.folder import sentencepiece_vocabulary, write_export
from transformer_core.model.transformer import (
    LAYER_NORM_EPS,
    MultiHeadAttention,
    Transformer,
    sinusoidal_encoding,
)
from transformer_core.settings import EXPORT_QUANTIZATIONS

SPM_NAME = "sentencepiece.model"
# The pieces to suppress so that CTranslate2 searches like ``translate`` (see the docstring):
# pad and BOS, as the project's sentencepiece models name them (export.json names each
# export's own).
SUPPRESSED_PIECES = ("<pad>", "<s>")


def require_ctranslate2():
    """The ``ctranslate2`` module, or a UserError saying which extra installs it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError(
            "exporting to CTranslate2 needs the ctranslate2 package: "
            'pip install -e ".[serve]" (or pip install ctranslate2)'
        ) from None
    return ctranslate2


def _array(tensor: torch.Tensor) -> np.ndarray:
    """An fp32 numpy copy of ``tensor``: never a view, since CTranslate2's ``optimize``
    rewrites its arrays in place and would change the model being exported."""
    return tensor.detach().to("cpu", torch.float32).numpy().copy()


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _fused(spec, *linears: torch.nn.Linear) -> None:
    """``spec`` = the projections ``linears`` stacked on their output dimension (one product)."""
    _linear(
        spec,
        torch.cat([linear.weight for linear in linears]),
        torch.cat([linear.bias for linear in linears]),
    )


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _attention(spec, attn: MultiHeadAttention, norm: torch.nn.LayerNorm, self_attention: bool):
    if self_attention:
        _fused(spec.linear[0], attn.w_q, attn.w_k, attn.w_v)
    else:
        _linear(spec.linear[0], attn.w_q.weight, attn.w_q.bias)
        _fused(spec.linear[1], attn.w_k, attn.w_v)
    _linear(spec.linear[-1], attn.w_o.weight, attn.w_o.bias)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec, layer) -> None:
    ffn = layer.feed_forward
    _linear(spec.linear_0, ffn.w_1.weight, ffn.w_1.bias)
    _linear(spec.linear_1, ffn.w_2.weight, ffn.w_2.bias)


def position_table(model: Transformer) -> np.ndarray:
    """The (max_positions, d_model) positions the model adds, from position 0."""
    cfg = model.cfg
    if cfg.positional == "learned":
        return _array(model.position_embedding.weight)
    return _array(sinusoidal_encoding(cfg.max_positions, cfg.d_model))


def check_exportable(model: Transformer) -> None:
    """UserError for a model CTranslate2's Transformer cannot express exactly."""
    cfg = model.cfg
    if cfg.d_k != cfg.d_v or cfg.h * cfg.d_k != cfg.d_model:
        raise UserError(
            f"CTranslate2's attention needs h * d_k = h * d_v = d_model; this model has h={cfg.h}, "
            f"d_k={cfg.d_k}, d_v={cfg.d_v}, d_model={cfg.d_model} (Table 3's rows (B) change d_k alone)"
        )


def ctranslate2_spec(model: Transformer, pieces: list[str], specials: dict[str, str]):
    """CTranslate2's ``TransformerSpec`` of ``model``, with ``pieces`` (the sentencepiece
    pieces in id order) as both vocabularies; ``specials`` names the unk, bos and eos pieces
    (``sentencepiece_vocabulary``)."""
    require_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    check_exportable(model)
    cfg = model.cfg
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.h,
        pre_norm=False,
        activation=common_spec.Activation.RELU,
    )
    embedding, positions = _array(model.embedding.weight), position_table(model)
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = True
        stack.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embedding
    spec.decoder.embeddings.weight = embedding
    spec.decoder.projection.weight = embedding
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers, strict=True):
        _attention(layer_spec.self_attention, layer.self_attn, layer.norm_1, self_attention=True)
        _feed_forward(layer_spec.ffn, layer)
        _norm(layer_spec.ffn.layer_norm, layer.norm_2)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers, strict=True):
        _attention(layer_spec.self_attention, layer.self_attn, layer.norm_1, self_attention=True)
        _attention(layer_spec.attention, layer.cross_attn, layer.norm_2, self_attention=False)
        _feed_forward(layer_spec.ffn, layer)
        _norm(layer_spec.ffn.layer_norm, layer.norm_3)
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.config.unk_token, spec.config.bos_token = specials["unk"], specials["bos"]
    spec.config.eos_token = specials["eos"]
    spec.config.decoder_start_token = specials["bos"]
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def export_ctranslate2(
    model: Transformer,
    sp,
    spm_path: str | os.PathLike,
    out: str | os.PathLike,
    quantization: str = "float32",
    provenance: dict | None = None,
) -> Path:
    """Write ``model`` as a CTranslate2 model folder ``out``, with its sentencepiece model.

    The folder is built beside ``out`` and renamed into place, so ``out`` is either the
    whole export or absent (an earlier export there is replaced). ``quantization``
    (``config.EXPORT_QUANTIZATIONS``) is the weight type CTranslate2 stores; ``provenance`` (checkpoint,
    sha256s) goes into ``export.json`` with the decoding options that match ``translate``.
    """
    ctranslate2 = require_ctranslate2()
    if quantization not in EXPORT_QUANTIZATIONS:
        raise UserError(
            f"--quantization must be one of {', '.join(EXPORT_QUANTIZATIONS)}, got {quantization!r}"
        )
    pieces, specials = sentencepiece_vocabulary(sp)
    spec = ctranslate2_spec(model, pieces, specials)
    spec.validate()
    spec.optimize(quantization=quantization)

    def fill(folder: Path) -> dict:
        spec.save(str(folder))
        shutil.copyfile(spm_path, folder / SPM_NAME)
        return {
            "format": "ctranslate2",
            "ctranslate2_version": ctranslate2.__version__,
            "quantization": quantization,
            "sentencepiece": SPM_NAME,
            "decode": {
                "suppress_sequences": [[specials["pad"]], [specials["bos"]]],
                "length_penalty_note": (
                    "CTranslate2 divides by |Y|^alpha (EOS not counted); the paper by "
                    "((5 + |Y|) / 6)^alpha"
                ),
            },
            **(provenance or {}),
        }

    return write_export(Path(out), fill)
