#!/usr/bin/env bash
# The GPU measurements of the README's "Measured on one NVIDIA H100", run on a lent GPU machine
# (no internet there) from the repository root:
#
#   bench/gpu/gpu_run.sh PART [PART ...] PART: tests, train, train25k, fixed, fixed3125, scaling,
#                                        attention, tuning, learning, learning_nodrop, decode,
#                                        workflow, workflow_compiled, decode_profile,
#                                        decode_fixed, cudagraphs, learning_check, before
#
# It expects, beside the working tree (ignored by git, carried to the machine):
#   .whl/        the Python 3.12 wheels the machine lacks (snakemake and its needs, sacremoses,
#                ctranslate2 for decode_fixed); the training parts need none
#   .gpu/data/   multi30k/ and wmt/newstest2014-deen-full.{en,de} from the shared data
#   .gpu/m30k/   for decode_fixed without workflow: a trained Multi30k checkpoint (averaged*.pt),
#                its spm.model, the prepared test.src and the German test.de
#   .gpu/before/ the previous commit's tree, for the part "before"
# and writes its logs and JSON results under $OUT (default: gpu_out/). GPU_DEADLINE (seconds
# from the start, default 420: under the 10 minutes one call may run, with time left to pack
# and bring back the results) bounds the whole run: each command is stopped at it, so a run
# inside a lease of minutes still ends with its results packed.
#
# The one call that decides whether the fast path becomes GPU training's default (docs/gpu.md,
# "The learning check"), about 6 minutes on an H200:
#
#   GPU_DEADLINE=420 bench/gpu/gpu_run.sh learning_check tests
#
# GPU_RUN_DEVICE=cpu rehearses any part on the CPU at tiny sizes (the same script, commands and
# files; tests/commands/test_gpu_run.py runs `learning_check tests` so), so that nothing in a
# lent GPU's minutes fails on an import, a path or an argument.
#
#   tests     pytest -m gpu (tests/commands/test_gpu.py)
#   train     bench.bench_train's GPU section at the settings a user gets (compile, batch
#             shapes and compute weights auto), base and big, 25,000 target tokens of 24-31-token
#             sentences a step (one width), profiled; the Hugging Face peer (eager, compiled) in
#             the same call
#   train_mix the same on sentences of 3 to 80 tokens (about 10 widths), compiled: a variant
#             not begun when the deadline nears is left out (--gpu-deadline); one begun compiles
#             every width it meets, so give this part a call of its own
#   decode    bench.bench_decode's GPU section on newstest2014: bf16 and fp32, variants
#   workflow  config/multi30k.yaml run whole by Snakemake from a fresh clone of HEAD
#   workflow_compiled  the same, trained compiled on fixed shapes with bf16 compute weights
#   decode_profile  after workflow, in the same call: its test_2016 decode under torch.profiler
#             (bench/profile_command.py) on the GPU and on 2 CPU threads, the workflow's flags
#   decode_fixed  the test_2016 decode of workflow (run before it in the same call) or of
#             .gpu/m30k/ with the workflow's flags: on the GPU eager, compiled (fixed-shape
#             step, CUDA graphs), on 2 CPU threads, and compiled again (from inductor's cache
#             on disk), each timed whole and scored; then newstest2014 in bf16 beside
#             CTranslate2 on the GPU (bench_ctranslate2 --only gpu)
#   train25k  the same with one micro-batch of 25,000 tokens per step (eager; big compiled)
#   fixed     base, then big, at 1 x 25,000 tokens a step: eager on exact widths against
#             compiled on fixed shapes with CUDA graphs, under bf16 autocast and with bf16
#             compute weights, each profiled; sentences of 24 to 31 tokens, so that every
#             batch is 32 wide (one shape to compile; a WMT mix's widths compile in a warm-up)
#   fixed3125 the same at 1 x 3,125 tokens a step (what each of the paper's 8 GPUs runs)
#   scaling   base, then big, compiled on fixed shapes with bf16 compute weights only, at
#             1 x 25,000 and 1 x 3,125 tokens a step: the ratio of the two steps, in one call
#   attention the step's attention (encoder, causal decoder) at base's and big's heads, widths 16
#             to 128, forward and backward: each SDPA kernel against varlen_attn over the same
#             sentences packed (bench.gpu.bench_gpu_attention)
#   tuning    base and big compiled with bf16 weights at 1 x 25,000, inductor's kernels tuned
#             (coordinate descent over the fused kernels' launch settings; then also max-autotune,
#             products and fused kernels benchmarked among alternatives at compile time)
#   learning  base trained 1,000 steps of 25,000 tokens on a reversal task, eager bf16 autocast
#             against itself with other dropout masks and against compiled (CUDA graphs) bf16
#             autocast and bf16 compute weights, the same batches: the NLL every 50 steps
#             (bench_shapes --learning)
#   learning_nodrop  the same without dropout (--learning-dropout 0): the paths differ in their
#             arithmetic alone
#   cudagraphs  what the CUDA-graph trees do in compiled training: pytest -m gpu's compiled
#             autocast case in-process, then ten steps of each variant, the trees' calls, skip
#             and recompile reasons (bench.gpu.probe_cudagraphs)
#   learning_check  the learning check on the GPU: base, 25,000 tokens a step of 24-31-token
#             sentences, lrate factor 0.15, 5 seeds, 300 steps, the reference (eager, exact
#             shapes, bf16 autocast) against the fast path (compiled, fixed shapes, bf16
#             weights); LEARNING_CHECK_BROKEN=lr_doubled adds the learning rate doubled, and
#             LEARNING_CHECK_PARTS=1 the fast path's parts (compiled under autocast; eager on
#             bf16 weights). About 25 s a seed on an H200; the result is written after each
#             seed, so a run stopped at GPU_DEADLINE keeps the seeds it finished
#   before    the previous commit's GPU sections (training, decoding) on the same machine
set -uo pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
ROOT=$PWD
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then  # the training parts need none
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
fi
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
BEGIN=$(date +%s)
DEADLINE=${GPU_DEADLINE:-420}
DEVICE=${GPU_RUN_DEVICE:-cuda}
# The parts' sizes: the GPU's, or the CPU rehearsal's tiny ones (every command, file and flag
# the same).
if [[ $DEVICE == cpu ]]; then
    LEARNING=(--device cpu --shape tiny --tokens 400 --lengths 2 20 --steps 20 --interval 5
        --candidates fixed)
    TRAIN=(--gpu-steps 2 --gpu-warmup 1 --gpu-profile-steps 0)
else
    LEARNING=(--device cuda --shape base --tokens 25000 --lengths 24 31 --steps 300 --interval 25
        --candidates compiled_bf16_weights ${LEARNING_CHECK_PARTS:+compiled bf16_weights})
    TRAIN=(--gpu-steps 30 --gpu-warmup 6 --gpu-profile-steps 2)
fi
# `bounded CMD...`: CMD, stopped at GPU_DEADLINE seconds from the start (status 124).
bounded() {
    local left=$((DEADLINE - ($(date +%s) - BEGIN)))
    if ((left < 5)); then
        echo "skipped (deadline): $*" | tee -a "$OUT/times.txt"
        return 124
    fi
    timeout -k 5 "$left" "$@"
}
# `one_width PART NAME MODEL TOKENS STEPS ARGS...`: bench_train's GPU section for MODEL at one
# micro-batch of TOKENS a step, sentences of 24 to 31 tokens (every batch 32 wide), profiled,
# into $OUT/train_gpu_PART_NAME.json.
one_width() {
    local part=$1 name=$2 model=$3 tokens=$4 steps=$5
    shift 5
    bounded python3 -m bench.bench_train --gpu-only "$@" --gpu-shapes "$model" \
        --gpu-max-tokens "$tokens" --gpu-tokens-per-step "$tokens" --gpu-batch-shapes auto \
        --gpu-lengths 24 31 --gpu-steps "$steps" --gpu-warmup 6 --gpu-profile-steps 2 \
        --out "$OUT/train_gpu_${part}_${name}.json" 2>&1 | tee -a "$OUT/train_gpu_$part.log"
}
if [[ $DEVICE == cuda ]]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/gpu.txt"
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name())" >>"$OUT/gpu.txt"
else
    python3 -c "import torch; print('torch', torch.__version__, 'CPU rehearsal')" >"$OUT/gpu.txt"
fi
cat "$OUT/gpu.txt"

for part in "$@"; do
    start=$(date +%s)
    case $part in
    tests)
        bounded python3 -m pytest -q -m gpu tests/commands/test_gpu.py -p no:cacheprovider 2>&1 |
            tee "$OUT/tests.log"
        ;;
    cudagraphs)
        bounded python3 -m bench.gpu.probe_cudagraphs --out "$OUT/cudagraphs.json" \
            2>"$OUT/cudagraphs.log"
        grep -E "skipping|Unable to hit|Recompiling|triggered|: \{" "$OUT/cudagraphs.log" | head -40
        ;;
    learning_check)
        # shellcheck disable=SC2086  # LEARNING_CHECK_BROKEN: none, or names
        bounded python3 -m bench.bench_learning_check "${LEARNING[@]}" --seeds 1 2 3 4 5 \
            --lr-scale 0.15 --broken ${LEARNING_CHECK_BROKEN:-} \
            --out "$OUT/learning_check_base.json" 2>&1 | tee "$OUT/learning_check.log"
        ;;
    train | train_mix)
        lengths=(24 31) && [[ $part == train_mix ]] && lengths=(3 80)
        compile=auto && [[ $part == train_mix ]] && compile=on
        bounded python3 -m bench.bench_train --gpu-only --gpu-compile $compile \
            --gpu-batch-shapes auto --gpu-compute-weights auto --gpu-max-tokens 25000 \
            --gpu-tokens-per-step 25000 --gpu-lengths "${lengths[@]}" "${TRAIN[@]}" \
            --gpu-peer eager compiled --gpu-deadline $((DEADLINE - ($(date +%s) - BEGIN) - 60)) \
            --out "$OUT/${part}_gpu.json" 2>&1 | tee "$OUT/${part}_gpu.log"
        ;;
    decode)
        bounded python3 -m bench.bench_decode --gpu-only --gpu-precisions bf16 fp32 \
            --gpu-max-tokens 8192 32768 --out "$OUT/decode_gpu.json" 2>&1 | tee "$OUT/decode_gpu.log"
        bounded python3 -m bench.bench_decode --gpu-only --gpu-precisions bf16 --gpu-compile on \
            --gpu-max-tokens 8192 --out "$OUT/decode_gpu_compile.json" 2>&1 |
            tee -a "$OUT/decode_gpu.log"
        for cudnn in off on; do  # the first 600 sentences: cuDNN's attention is slow here
            bounded python3 -m bench.bench_decode --gpu-only --gpu-precisions bf16 --gpu-cudnn $cudnn \
                --gpu-max-tokens 8192 --gpu-sentences 600 \
                --out "$OUT/decode_gpu_cudnn_$cudnn.json" 2>&1 | tee -a "$OUT/decode_gpu.log"
        done
        ;;
    fixed | fixed3125)
        tokens=25000
        [[ $part == fixed3125 ]] && tokens=3125
        for model in base big; do
            for variant in "off --gpu-compute-weights fp32" "on --gpu-compute-weights fp32 bf16"; do
                # shellcheck disable=SC2086  # the variant is several arguments
                one_width fixed "${model}_${tokens}_${variant%% *}" $model $tokens 20 \
                    --gpu-compile $variant
            done
        done
        ;;
    scaling)
        for model in base big; do
            for tokens in 25000 3125; do
                one_width scaling "${model}_${tokens}" $model $tokens 30 \
                    --gpu-compile on --gpu-compute-weights bf16
            done
        done
        ;;
    tuning)
        export TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1
        for autotune in 0 1; do
            for model in base big; do
                TORCHINDUCTOR_MAX_AUTOTUNE=$autotune one_width tuning \
                    "${model}_max_autotune_$autotune" $model 25000 20 \
                    --gpu-compile on --gpu-compute-weights bf16
            done
        done
        unset TORCHINDUCTOR_COORDINATE_DESCENT_TUNING
        ;;
    attention)
        bounded python3 -m bench.gpu.bench_gpu_attention --out "$OUT/attention_gpu.json" 2>&1 |
            tee "$OUT/attention_gpu.log"
        ;;
    learning | learning_nodrop)
        dropout=0.1 && [[ $part == learning_nodrop ]] && dropout=0
        bounded python3 -m bench.bench_shapes --no-shapes --learning-dropout $dropout \
            --learning 1000 --learning-device cuda --learning-shape base --learning-tokens 25000 \
            --learning-lengths 24 31 --out "$OUT/${part}_gpu.json" 2>&1 | grep -v "^W[0-9]" |
            tee "$OUT/${part}_gpu.log"
        ;;
    workflow | workflow_compiled)
        configs=(config/multi30k.yaml)
        if [[ $part == workflow_compiled ]]; then  # the training step this file measures
            printf 'train: {compile: "on", compute_weights: bf16}\n' >/tmp/compiled.yaml
            configs+=(/tmp/compiled.yaml)
        fi
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
        bounded env TRANSFORMER_LOCAL_GPUS=1 /usr/bin/time -v snakemake \
            --profile workflow/profiles/default --configfile "${configs[@]}" \
            --config mirror="$ROOT/.gpu/data" -- results/table2.csv results/table3.csv \
            >>"$OUT/workflow.log" 2>&1
        echo "snakemake exit $?" | tee -a "$OUT/workflow.log"
        grep -A12 "^Error in rule\|Traceback\|Error:" "$OUT/workflow.log" | head -40
        grep -h "done:\|test_2016\|translate: 1000" logs/train/* logs/translate/* 2>/dev/null | tail -5
        cat results/table2.csv 2>/dev/null | head -5
        grep -E "Elapsed|Maximum resident" "$OUT/workflow.log"
        cp results/table2.csv results/table3.csv "$OUT/" 2>/dev/null
        tar czf "$OUT/workflow_logs.tgz" logs benchmarks runs/en_de/base/metrics.jsonl \
            runs/en_de/base/summary.json 2>/dev/null
        mkdir -p "$ROOT/.gpu/m30k"  # what decode_fixed decodes
        cp runs/en_de/base/averaged.pt data/en_de/spm.model "$ROOT/.gpu/m30k/"
        cp data/en_de/prepared/test.src data/en_de/raw/test.de "$ROOT/.gpu/m30k/"
        cd "$ROOT" || exit 1
        ;;
    decode_profile | decode_fixed)
        m30k=$ROOT/.gpu/m30k
        checkpoint=$(ls "$m30k"/averaged*.pt | head -1)
        flags=(--checkpoint "$checkpoint" --spm "$m30k/spm.model" --input "$m30k/test.src"
            --beam 4 --alpha 2.0 --max-len-a 1.0 --max-len-b 50 --max-tokens 4096 --num-threads 2)
        runs=("cuda off" "cuda on" "cpu off" "cuda on")
        [[ $part == decode_profile ]] && runs=()
        for device in $([[ $part == decode_profile ]] && echo cuda cpu); do
            bounded python3 -m bench.profile_command \
                --out "$OUT/translate_profile_$device.json" -- translate "${flags[@]}" \
                --output "/tmp/profiled_$device.txt" --device "$device" 2>&1 |
                tail -n 4 | tee -a "$OUT/translate_profile.log"
        done
        for run in "${runs[@]}"; do
            read -r device compile <<<"$run"
            begin=$(date +%s%N)
            bounded transformer-core translate "${flags[@]}" --device "$device" \
                --compile "$compile" --output "/tmp/fixed_${device}_$compile.txt" 2>&1 |
                tail -n 2 | tee -a "$OUT/decode_fixed.log"
            echo "translate $device compile $compile: $((($(date +%s%N) - begin) / 1000000)) ms," \
                "sacreBLEU $(python3 -m sacrebleu "$m30k/test.de" -i "/tmp/fixed_${device}_$compile.txt" -b)" |
                tee -a "$OUT/decode_fixed.log"
        done
        if [[ $part == decode_fixed ]]; then
            python3 -c "import sys; a, b = (open(f).readlines() for f in sys.argv[1:]); \
print(sum(x != y for x, y in zip(a, b)), 'of', len(a), 'lines differ, GPU eager against compiled')" \
                /tmp/fixed_cuda_off.txt /tmp/fixed_cuda_on.txt | tee -a "$OUT/decode_fixed.log"
            bounded python3 -m bench.bench_ctranslate2 --only gpu \
                --out "$OUT/decode_gpu_ctranslate2.json" 2>&1 | tee -a "$OUT/decode_fixed.log"
        fi
        ;;
    train25k)  # one micro-batch of 25,000 tokens per step: half the launches of two
        bounded python3 -m bench.bench_train --gpu-only --gpu-max-tokens 25000 --gpu-compile off \
            --gpu-steps 50 --gpu-warmup 10 --gpu-profile-steps 5 --out "$OUT/train_gpu_25k.json" \
            2>&1 | tee "$OUT/train_gpu_25k.log"
        bounded python3 -m bench.bench_train --gpu-only --gpu-max-tokens 25000 --gpu-shapes big \
            --gpu-compile on --gpu-steps 50 --gpu-warmup 10 --gpu-profile-steps 5 \
            --out "$OUT/train_gpu_25k_compiled.json" 2>&1 | tee -a "$OUT/train_gpu_25k.log"
        ;;
    before)
        cd .gpu/before || exit 1
        bounded python3 -c "
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from bench.lib.decode_runners import file_decoding, gpu_sources
from bench.lib.hardware import write_result
from bench.lib.train_gpu import GpuRun, GpuVariant, gpu_throughput
from bench.lib.train_runners import Steps
out = {}
run = GpuRun(Steps(max_tokens=12500, tokens_per_step=25000, timed=5, warmup=2))
with tempfile.TemporaryDirectory() as tmp:
    for shape in ('base', 'big'):
        out['train_' + shape] = gpu_throughput(GpuVariant(shape), run, Path(tmp))
        print(json.dumps(out['train_' + shape]), flush=True)
out['decode'] = file_decoding(*gpu_sources(300), 8192)
print(json.dumps(out['decode']), flush=True)
write_result('$OUT/before_gpu.json', out, indent=2)
" 2>&1 | tee "$OUT/before_gpu.log"
        cd "$ROOT" || exit 1
        ;;
    *)
        echo "unknown part $part" >&2
        ;;
    esac
    echo "== $part: $(($(date +%s) - start)) s" | tee -a "$OUT/times.txt"
done
# At most 8 files come back from $OUT: all of them in one archive.
cd "$OUT" && tar czf ../gpu_results.tgz . && find . -type f -delete && mv ../gpu_results.tgz .
