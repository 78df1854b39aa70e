"""The shapes of the decoding steps of a whole newstest2014-sized decode: the eager decoder's
against the fixed-shape decoder's (``decoding.fixed_step``), which is what a compiled step or
a CUDA graph meets.

A step's shape is (decoder rows, cache positions, source positions): for the eager decoder the
rows still active, the positions written so far and the batch's source width; for the
fixed-shape one the rows of its sentence slots, the cache's capacity and the padded source
width, counted over the steps it compiles (beam > 1: the first step of a batch runs eagerly).
The decode: 3,003 sources of newstest2014's lengths (random pieces), the small model of
``bench_host`` (``shapes.SMALL``) with random weights, beam 4, each output forced to its source's length, in
``translate``'s batches of ``--max-tokens`` source tokens.

    python -m bench.bench_step_shapes            # about a minute on 2 CPU cores
    python -m bench.bench_step_shapes --quick    # 300 sources

Writes bench/results/HARDWARE/decode_step_shapes.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from bench.lib.decode_runners import FORCED, decoding_sources
from bench.lib.hardware import result_path, write_result
from bench.lib.shapes import SMALL
from transformer_core.decoding.fixed_step import FixedShapeDecoder
from transformer_core.decoding.inference import DecodingRuntime
from transformer_core.decoding.translate import translate_ids
from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer


def step_shapes(quick: bool, max_tokens: int) -> dict:
    """The distinct step shapes of the eager and the fixed-shape decoder over the same decode."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(dropout=0.0, vocab_size=8000, **SMALL)).eval()
    sources = decoding_sources(8000, 300 if quick else 3003, seed=4)
    eager_shapes, fixed_shapes = [], []
    decode_step = model.decode_step

    def eager_step(tokens, state):
        eager_shapes.append((tokens.size(0), state.position + 1, state.src_mask.size(-1)))
        return decode_step(tokens, state)

    fixed = FixedShapeDecoder(model)
    fixed_step = fixed.step

    def counted_fixed_step(tokens, rows, position, encodings, caches, src_mask, beam):
        fixed_shapes.append((tokens.size(0), caches.self_k[0].size(2), src_mask.size(-1)))
        return fixed_step(tokens, rows, position, encodings, caches, src_mask, beam)

    fixed.step = counted_fixed_step
    outputs = {}
    for name, decoder in (("fixed", fixed), ("eager", model)):
        if name == "eager":
            model.decode_step = eager_step
        outputs[name] = translate_ids(decoder, sources, FORCED, DecodingRuntime(max_tokens))
    assert outputs["fixed"] == outputs["eager"], "the fixed-shape decoder's outputs are eager's"
    return {
        "sentences": len(sources),
        "max_tokens": max_tokens,
        "eager_steps": len(eager_shapes),
        "eager_distinct_shapes": len(set(eager_shapes)),
        "fixed_steps_compiled": len(fixed_shapes),
        "fixed_distinct_shapes": len(set(fixed_shapes)),
        "fixed_distinct_rows": len({r for r, _, _ in fixed_shapes}),
        "fixed_distinct_capacities": len({c for _, c, _ in fixed_shapes}),
        "fixed_distinct_source_widths": len({s for _, _, s in fixed_shapes}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 sources")
    parser.add_argument(
        "--max-tokens", type=int, default=8192, help="source tokens per batch (default: 8192)"
    )
    parser.add_argument("--out", default=str(result_path("decode_step_shapes")))
    args = parser.parse_args(argv)
    result = step_shapes(args.quick, args.max_tokens)
    print(json.dumps(result), file=sys.stderr)
    write_result(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
