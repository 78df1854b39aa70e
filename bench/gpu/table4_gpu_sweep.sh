#!/usr/bin/env bash
# Table 4's dev ablation on one GPU: every variant of bench/table4_dev.py trains side by side
# (one process each), then the checkpoints of each learning curve are decoded and scored on dev.
# Run from the repository root on the lent GPU machine:
#
#   bench/gpu/table4_gpu_sweep.sh SWEEP [TRAIN_SECONDS]
#
# SWEEP names a file of variants (bench/gpu/table4_sweeps/*.txt), one per line: NAME and
# bench.table4_dev's training options.
# Each run trains until its --steps or TRAIN_SECONDS (default 330), whichever comes first,
# with a checkpoint every CURVE_EVERY steps (default 4000) kept; then every checkpoint at a
# multiple of CURVE_EVERY is decoded (beam 4, alpha 1.0; at most DECODE_SECONDS each, default
# 150), without and with --tree-constraint (NAME@STEPc; only with it when UNCONSTRAINED=0), and
# scored: one JSON line each in $OUT/sweep.jsonl, the logs in $OUT/logs.tgz.
# With AVERAGES (e.g. "5 20") the runs keep a checkpoint every AVERAGE_EVERY steps (default 100,
# as config/nltk_parsing.yaml) instead, and each run's averages of its last N are decoded with
# the shipped search (FINAL_SEARCH, default beam 21 and alpha 2.0, with the tree constraint;
# NAME@aN), not the curve. It needs ptb/nltk_treebank.zip under .gpu/data/ (carried beside the
# tree) and the wheels of .whl/ (sacremoses). With AVERAGE_ONLY=1 the averages are not decoded
# but come back as $OUT/NAME_aN.pt (with each run's data/spm.model in logs.tgz), to be decoded
# elsewhere: runs too long to train and decode within one call.
# Decoding with the shipped search on the host takes long: at d_model 192, eight decodes side by
# side (2 threads each, the H100 machine's 16 Xeon cores) took 253 s and more each (the eighth
# sweep lost seven of its eight to a DECODE_SECONDS of 170, then of 262); plan a call's time for it.
set -uo pipefail
SWEEP=$1
TRAIN_SECONDS=${2:-330}
CURVE_EVERY=${CURVE_EVERY:-4000}
DECODE_SECONDS=${DECODE_SECONDS:-150}
AVERAGES=${AVERAGES:-}
read -ra FINAL_SEARCH <<<"${FINAL_SEARCH:---beam 21 --alpha 2.0}"
SEARCHES=("" --tree-constraint)
[ "${UNCONSTRAINED:-1}" = 0 ] && SEARCHES=(--tree-constraint)
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
ROOT=$PWD
WORK=/tmp/table4_sweep
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
if ! python3 -c "import sacremoses" 2>/dev/null; then  # the GPU machine lacks it
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$ROOT:/tmp/site
ZIP=$ROOT/.gpu/data/ptb/nltk_treebank.zip
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >>"$OUT/gpu.txt"
cat "$OUT/gpu.txt"

KEEP=(--checkpoint-interval "$CURVE_EVERY" --keep-last 100)
if [ -n "$AVERAGES" ]; then
    # shellcheck disable=SC2086  # the averages are words
    most=$(printf '%s\n' $AVERAGES | sort -n | tail -1)
    KEEP=(--checkpoint-interval "${AVERAGE_EVERY:-100}" --keep-last "$most")
fi

start=$(date +%s)
while read -r name options; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
    # shellcheck disable=SC2086  # the options are words
    timeout "$TRAIN_SECONDS" python3 -m bench.table4_dev "$name" --train-only --work "$WORK" \
        --zip "$ZIP" "${KEEP[@]}" $options \
        >"$WORK/$name.log" 2>&1 &
done <"$SWEEP"
wait
echo "trained in $(($(date +%s) - start)) s"
for log in "$WORK"/*/train.log; do
    echo "$(basename "$(dirname "$log")"): $(grep "dev loss" "$log" | tail -1)"
done

start=$(date +%s)
jobs=0
for run in "$WORK"/*/run; do
    [ -n "$AVERAGES" ] && break
    name=$(basename "$(dirname "$run")")
    for checkpoint in "$run"/checkpoints/step_*.pt; do
        [ -f "$checkpoint" ] || continue
        step=$((10#$(basename "$checkpoint" .pt | cut -d_ -f2)))
        [ $((step % CURVE_EVERY)) -eq 0 ] || continue
        for constraint in "${SEARCHES[@]}"; do
            timeout "$DECODE_SECONDS" python3 -m bench.table4_dev "$name@$step${constraint:+c}" \
                --from "$name" --work "$WORK" --zip "$ZIP" $constraint \
                --checkpoint "checkpoints/$(basename "$checkpoint")" --beam 4 --alpha 1.0 \
                --out "$OUT/sweep.jsonl" >>"$WORK/decode.log" 2>&1 &
            jobs=$((jobs + 1))
            if [ "$jobs" -ge 16 ]; then
                wait -n
                jobs=$((jobs - 1))
            fi
        done
    done
done
for run in "$WORK"/*/run; do
    [ -n "$AVERAGES" ] || break
    name=$(basename "$(dirname "$run")")
    for last in $AVERAGES; do
        if [ "${AVERAGE_ONLY:-0}" = 1 ]; then
            python3 -m transformer_core average --run-dir "$run" --last "$last" \
                --out "$OUT/${name}_a$last.pt" >>"$WORK/decode.log" 2>&1
            continue
        fi
        timeout "$DECODE_SECONDS" python3 -m bench.table4_dev "$name@a$last" --from "$name" \
            --work "$WORK" --zip "$ZIP" --average "$last" --tree-constraint "${FINAL_SEARCH[@]}" \
            --out "$OUT/sweep.jsonl" >>"$WORK/decode.log" 2>&1 &
    done
done
wait
echo "decoded in $(($(date +%s) - start)) s"
tail -n 5 "$WORK"/*.log "$WORK/decode.log" | tail -n 60
# $OUT brings back 8 files: the logs travel in one archive.
tar czf "$OUT/logs.tgz" -C "$WORK" --exclude='*.pt' --exclude='*.bin' --exclude='*.idx' . 2>/dev/null
[ -f "$OUT/sweep.jsonl" ] || exit 0
python3 - "$OUT/sweep.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def key(row):
    name, step = row["name"].split("@")
    return name, int(step.strip("ac")), step
for row in sorted(rows, key=key):
    print(f"{row['name']:24} F1 {row['f1']:6.2f}  {row['dev']}")
EOF
