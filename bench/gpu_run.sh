#!/usr/bin/env bash
# The GPU measurements of the README's "Measured on one NVIDIA H100", run on a lent GPU machine
# (no internet there) from the repository root:
#
#   bench/gpu_run.sh PART [PART ...]     PART: tests, train, train25k, fixed, decode, workflow,
#                                        decode_profile, decode_fixed, before
#
# It expects, beside the working tree (ignored by git, carried to the machine):
#   .whl/        the Python 3.12 wheels the machine lacks (snakemake and its needs, sacremoses,
#                ctranslate2 for decode_fixed)
#   .gpu/data/   multi30k/ and wmt/newstest2014-deen-full.{en,de} from the shared data
#   .gpu/before/ the previous commit's tree, for the part "before"
# and writes its logs and JSON results under $OUT (default: gpu_out/).
#
#   tests     pytest -m gpu (tests/commands/test_gpu.py)
#   train     bench.bench_train's GPU section: base and big, eager and compiled, profiled
#   decode    bench.bench_decode's GPU section on newstest2014: bf16 and fp32, variants
#   workflow  config/multi30k.yaml run whole by Snakemake from a fresh clone of HEAD
#   decode_profile  after workflow, in the same call: its test_2016 decode under torch.profiler
#             (bench/profile_command.py) on the GPU and on 2 CPU threads, the workflow's flags
#   decode_fixed  after workflow, in the same call: its test_2016 decode with the workflow's
#             flags on the GPU eager, compiled (fixed-shape step, CUDA graphs) twice (the second
#             from inductor's cache on disk), and on 2 CPU threads, each timed whole; then
#             newstest2014 in bf16 beside CTranslate2 on the GPU (bench_ctranslate2 --only gpu)
#   train25k  the same with one micro-batch of 25,000 tokens per step (eager; big compiled)
#   fixed     base at 1 x 25,000 tokens a step: eager on exact widths against compiled on
#             fixed shapes (the 10 ladder widths of the synthetic corpus compile in the
#             warm-up), and compiled with TORCHINDUCTOR_CUDAGRAPHS=1; then base at 1 x 3,125
#             and big at 1 x 25,000, eager against compiled; each profiled
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
        # Base at 1 x 25,000 first (eager on exact widths, then compiled on fixed shapes), then
        # the same compiled with inductor's CUDA graphs, then 1 x 3,125 (what each of 8 GPUs
        # runs) and big. Every compiled run compiles the ladder widths it meets in its warm-up.
        for run in "base 25000 off,on 0" "base 25000 on 1" "base 3125 off,on 0" "big 25000 off,on 0"; do
            read -r model tokens compile graphs <<<"$run"
            TORCHINDUCTOR_CUDAGRAPHS=$graphs python3 -m bench.bench_train --gpu-only \
                --gpu-shapes "$model" --gpu-max-tokens "$tokens" --gpu-tokens-per-step "$tokens" \
                --gpu-compile ${compile//,/ } --gpu-batch-shapes auto --gpu-steps 30 \
                --gpu-warmup 40 --gpu-profile-steps 3 \
                --out "$OUT/train_gpu_fixed_${model}_${tokens}_graphs$graphs.json" 2>&1 |
                tee -a "$OUT/train_gpu_fixed.log"
        done
        ;;
    decode_profile)
        cd /tmp/fresh || exit 1
        src=$(ls data/en_de/prepared/test*.src | head -1)
        for device in cuda cpu; do
            python3 -m bench.profile_command --out "$OUT/translate_profile_$device.json" -- \
                translate --checkpoint runs/en_de/base/averaged.pt --spm data/en_de/spm.model \
                --input "$src" --output "/tmp/profiled_$device.txt" --beam 4 --alpha 2.0 \
                --max-len-a 1.0 --max-len-b 50 --max-tokens 4096 --device "$device" \
                --num-threads 2 2>&1 | tail -n 4 | tee -a "$OUT/translate_profile.log"
        done
        cd "$ROOT" || exit 1
        ;;
    decode_fixed)
        cd /tmp/fresh || exit 1
        src=$(ls data/en_de/prepared/test*.src | head -1)
        for run in "cuda off" "cuda on" "cuda on" "cpu off"; do
            read -r device compile <<<"$run"
            begin=$(date +%s%N)
            transformer-core translate --checkpoint runs/en_de/base/averaged.pt \
                --spm data/en_de/spm.model --input "$src" --output "/tmp/fixed_${device}_$compile.txt" \
                --beam 4 --alpha 2.0 --max-len-a 1.0 --max-len-b 50 --max-tokens 4096 \
                --device "$device" --compile "$compile" --num-threads 2 2>&1 | tail -n 2 |
                tee -a "$OUT/decode_fixed.log"
            echo "translate $device compile $compile: $((($(date +%s%N) - begin) / 1000000)) ms" |
                tee -a "$OUT/decode_fixed.log"
        done
        python3 -c "import sys; a, b = (open(f).readlines() for f in sys.argv[1:]); \
print(sum(x != y for x, y in zip(a, b)), 'of', len(a), 'lines differ, GPU eager against compiled')" \
            /tmp/fixed_cuda_off.txt /tmp/fixed_cuda_on.txt | tee -a "$OUT/decode_fixed.log"
        cd "$ROOT" || exit 1
        python3 -m bench.bench_ctranslate2 --only gpu --out "$OUT/decode_gpu_ctranslate2.json" 2>&1 |
            tee -a "$OUT/decode_fixed.log"
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
