#!/usr/bin/env bash
# The GPU measurements of the README's "Measured on one NVIDIA H100", run on a lent GPU machine
# (no internet there) from the repository root:
#
#   bench/gpu_run.sh PART [PART ...]     PART: tests, train, train25k, decode, workflow, before
#
# It expects, beside the working tree (ignored by git, carried to the machine):
#   .whl/        the Python 3.12 wheels the machine lacks (snakemake and its needs, sacremoses)
#   .gpu/data/   multi30k/ and wmt/newstest2014-deen-full.{en,de} from the shared data
#   .gpu/before/ the previous commit's tree, for the part "before"
# and writes its logs and JSON results under $OUT (default: gpu_out/).
#
#   tests     pytest -m gpu (tests/commands/test_gpu.py)
#   train     bench.bench_train's GPU section: base and big, eager and compiled, profiled
#   decode    bench.bench_decode's GPU section on newstest2014: bf16 and fp32, variants
#   workflow  config/multi30k.yaml run whole by Snakemake from a fresh clone of HEAD
#   train25k  the same with one micro-batch of 25,000 tokens per step (eager; big compiled)
#   fixed     base at 1 x 25,000 and 1 x 3,125 tokens a step: eager on exact widths against
#             compiled on fixed shapes (the 10 ladder widths of the synthetic corpus compile
#             in the warm-up), profiled; then big at 1 x 25,000 the same way
#   before    the previous commit's GPU sections (training, decoding) on the same machine
set -uo pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
ROOT=$PWD
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$ROOT:/tmp/site
# The workflow calls `transformer-core` and `python -m transformer_core`.
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -m transformer_core "$@"\n' >/tmp/bin/transformer-core
chmod +x /tmp/bin/transformer-core
# A wrapper, not a symlink: a symlinked venv interpreter does not find its venv.
printf '#!/bin/sh\nexec python3 "$@"\n' >/tmp/bin/python
chmod +x /tmp/bin/python
export PATH=/tmp/bin:/tmp/site/bin:$PATH
export TRANSFORMER_CORE_SHARED_DATA=$ROOT/.gpu/data
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name())" >>"$OUT/gpu.txt"
cat "$OUT/gpu.txt"

for part in "$@"; do
    start=$(date +%s)
    case $part in
    tests)
        python3 -m pytest -q -m gpu tests/commands/test_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/tests.log"
        ;;
    train)
        python3 -m bench.bench_train --gpu-only --gpu-compile off on --gpu-steps 50 \
            --gpu-warmup 10 --gpu-profile-steps 5 --out "$OUT/train_gpu.json" 2>&1 |
            tee "$OUT/train_gpu.log"
        python3 -m bench.bench_train --gpu-only --gpu-shapes base --gpu-compile off \
            --gpu-cudnn-attention --gpu-steps 30 --gpu-warmup 10 --gpu-profile-steps 0 \
            --out "$OUT/train_gpu_cudnn.json" 2>&1 | tee "$OUT/train_gpu_cudnn.log"
        ;;
    decode)
        python3 -m bench.bench_decode --gpu-only --gpu-precisions bf16 fp32 \
            --gpu-max-tokens 8192 32768 --out "$OUT/decode_gpu.json" 2>&1 | tee "$OUT/decode_gpu.log"
        python3 -m bench.bench_decode --gpu-only --gpu-precisions bf16 --gpu-compile on \
            --gpu-max-tokens 8192 --out "$OUT/decode_gpu_compile.json" 2>&1 |
            tee -a "$OUT/decode_gpu.log"
        for cudnn in off on; do  # the first 600 sentences: cuDNN's attention is slow here
            python3 -m bench.bench_decode --gpu-only --gpu-precisions bf16 --gpu-cudnn $cudnn \
                --gpu-max-tokens 8192 --gpu-sentences 600 \
                --out "$OUT/decode_gpu_cudnn_$cudnn.json" 2>&1 | tee -a "$OUT/decode_gpu.log"
        done
        ;;
    fixed)
        for run in "base 25000" "base 3125" "big 25000"; do
            read -r model tokens <<<"$run"
            python3 -m bench.bench_train --gpu-only --gpu-shapes "$model" --gpu-max-tokens "$tokens" \
                --gpu-tokens-per-step "$tokens" --gpu-compile off on --gpu-batch-shapes auto \
                --gpu-steps 30 --gpu-warmup 40 --gpu-profile-steps 3 \
                --out "$OUT/train_gpu_fixed_${model}_$tokens.json" 2>&1 | tee -a "$OUT/train_gpu_fixed.log"
        done
        ;;
    workflow)
        rm -rf /tmp/fresh
        if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
            git clone -q "$ROOT" /tmp/fresh && git -C /tmp/fresh log --oneline -1 >"$OUT/workflow.log"
        else  # the tree came without .git: copy it, less what the runs write
            mkdir -p /tmp/fresh && tar -C "$ROOT" --exclude=./.whl --exclude=./.gpu \
                --exclude=./gpu_out -cf - . | tar -C /tmp/fresh -xf -
            echo "copied tree (no .git)" >"$OUT/workflow.log"
        fi
        cd /tmp/fresh || exit 1
        # The profile with one local GPU: GPU jobs (train, translate) run one at a time.
        TRANSFORMER_LOCAL_GPUS=1 /usr/bin/time -v snakemake --profile workflow/profiles/default \
            --configfile config/multi30k.yaml --config mirror="$ROOT/.gpu/data" \
            -- results/table2.csv results/table3.csv >>"$OUT/workflow.log" 2>&1
        echo "snakemake exit $?" | tee -a "$OUT/workflow.log"
        grep -A12 "^Error in rule\|Traceback\|Error:" "$OUT/workflow.log" | head -40
        for log in $(grep -l "Traceback\|Error" logs/*/* 2>/dev/null | head -3); do
            echo "== $log"; tail -n 15 "$log"
        done
        grep -h "done:\|test_2016\|translate: 1000" logs/train/* logs/translate/* 2>/dev/null | tail -5
        cat results/table2.csv 2>/dev/null | head -5
        grep -E "Elapsed|Maximum resident" "$OUT/workflow.log"
        cp results/table2.csv results/table3.csv "$OUT/" 2>/dev/null
        tar czf "$OUT/workflow_logs.tgz" logs benchmarks runs/en_de/base/metrics.jsonl \
            runs/en_de/base/summary.json data/en_de/spm.model data/en_de/raw/test.* \
            data/en_de/prepared/test.* results/translations 2>/dev/null
        # The test decode's checkpoint, for the same decode on this repository's CPU.
        split -b 15M runs/en_de/base/averaged.pt "$OUT/averaged.pt.part-"
        cd "$ROOT" || exit 1
        ;;
    train25k)  # one micro-batch of 25,000 tokens per step: half the launches of two
        python3 -m bench.bench_train --gpu-only --gpu-max-tokens 25000 --gpu-compile off \
            --gpu-steps 50 --gpu-warmup 10 --gpu-profile-steps 5 --out "$OUT/train_gpu_25k.json" \
            2>&1 | tee "$OUT/train_gpu_25k.log"
        python3 -m bench.bench_train --gpu-only --gpu-max-tokens 25000 --gpu-shapes big \
            --gpu-compile on --gpu-steps 50 --gpu-warmup 10 --gpu-profile-steps 5 \
            --out "$OUT/train_gpu_25k_compiled.json" 2>&1 | tee -a "$OUT/train_gpu_25k.log"
        ;;
    before)
        cd .gpu/before || exit 1
        python3 -c "
import json, sys, tempfile, torch
from pathlib import Path
sys.path.insert(0, '.')
from bench import bench_train, bench_decode
out = {}
with tempfile.TemporaryDirectory() as tmp:
    for shape in ('base', 'big'):
        out['train_' + shape] = bench_train.gpu_throughput(shape, Path(tmp), 5, 2, 12500)
        print(json.dumps(out['train_' + shape]), flush=True)
out['decode'] = bench_decode.bench_file_decoding(8192, 300)
print(json.dumps(out['decode']), flush=True)
Path('$OUT/before_gpu.json').write_text(json.dumps(out, indent=2))
" 2>&1 | tee "$OUT/before_gpu.log"
        cd "$ROOT" || exit 1
        ;;
    *)
        echo "unknown part $part" >&2
        ;;
    esac
    echo "== $part: $(($(date +%s) - start)) s" | tee -a "$OUT/times.txt"
done
# At most 8 files come back from $OUT: everything but the checkpoint's parts in one archive.
cd "$OUT" && tar czf ../gpu_results.tgz --exclude='averaged.pt.part-*' . &&
    find . -type f ! -name 'averaged.pt.part-*' -delete && mv ../gpu_results.tgz .
