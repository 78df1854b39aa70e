# train (torchrun over the job's GPUs) -> average the last checkpoints.


rule train:
    input:
        train="data/{pair}/bin/train.json",
        dev="data/{pair}/bin/dev.json",
    output:
        summary="runs/{pair}/{exp}/summary.json",
        last="runs/{pair}/{exp}/last.pt",
        metrics="runs/{pair}/{exp}/metrics.jsonl",
    log:
        "logs/train/{pair}.{exp}.log",
    benchmark:
        "benchmarks/train/{pair}.{exp}.tsv"
    conda:
        ENV
    threads: configured_threads("train")
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        launcher=train_launcher,
        num_threads=threads_per_rank,
        args=lambda w: PLAN.train_args(w.pair, w.exp),
        run_dir=lambda w, output: os.path.dirname(output.summary),
        train=input_prefix("train"),
        dev=input_prefix("dev"),
    shell:
        # Across nodes the agents meet on the first node, where the batch script runs
        # (workflow_plan.runs.launcher); torchrun reads PET_RDZV_* as --rdzv-endpoint and
        # --rdzv-id, and a one-node launch ignores them.
        'export PET_RDZV_ENDPOINT="$(hostname):$((29400 + ${{SLURM_JOB_ID:-0}} % 1000))" '
        'PET_RDZV_ID="${{SLURM_JOB_ID:-local}}"; '
        "{params.launcher:q} train --train {params.train:q} --dev {params.dev:q} --out-dir {params.run_dir:q}"
        " {params.args:q} --num-threads {params.num_threads:q} --resume --restart-if-changed > {log:q} 2>&1"


rule average:
    input:
        "runs/{pair}/{exp}/summary.json",
    output:
        "runs/{pair}/{exp}/averaged.pt",
    log:
        "logs/average/{pair}.{exp}.log",
    conda:
        ENV
    params:
        run_dir=lambda w, input: os.path.dirname(input[0]),
        last=lambda w: PLAN.average_last(w.pair, w.exp),
    shell:
        "transformer-core average --run-dir {params.run_dir:q} --last {params.last:q} --out {output:q} > {log:q} 2>&1"
