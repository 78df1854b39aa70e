# translate (beam search) -> score (paper-style BLEU and sacreBLEU, with bootstrap intervals);
# bleu_curve: the dev BLEU of a run's kept checkpoints (BLEU against steps, in the report).


rule translate:
    input:
        checkpoint=lambda w: checkpoint_path(w.pair, w.exp, w.ckpt),
        spm="data/{pair}/spm.model",
        source=lambda w: DATA.parallel_text(w.pair, w.split)[0],
    output:
        "results/translations/{pair}/{exp}.{split}.{ckpt}.txt",
    log:
        "logs/translate/{pair}.{exp}.{split}.{ckpt}.log",
    benchmark:
        "benchmarks/translate/{pair}.{exp}.{split}.{ckpt}.tsv"
    conda:
        ENV
    threads: configured_threads("translate")
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        decode=lambda w: PLAN.decode_args(w.pair),
    shell:
        "transformer-core translate --checkpoint {input.checkpoint:q} --spm {input.spm:q}"
        " --input {input.source:q} --output {output:q} {params.decode:q}"
        " --num-threads {threads:q} > {log:q} 2>&1"


rule score:
    input:
        hyp="results/translations/{pair}/{exp}.{split}.{ckpt}.txt",
        ref=lambda w: DATA.reference(w.pair, w.split),
    output:
        "results/scores/{pair}/{exp}.{split}.{ckpt}.json",
    log:
        "logs/score/{pair}.{exp}.{split}.{ckpt}.log",
    conda:
        ENV
    params:
        lang=lambda w: languages(w.pair)[1],
        bootstrap=TABLES.bootstrap_args(),
    shell:
        "transformer-core score --hyp {input.hyp:q} --ref {input.ref:q} --lang {params.lang:q}"
        " {params.bootstrap:q} --out {output:q} > {log:q} 2>&1"


rule bleu_curve:
    input:
        summary="runs/{pair}/{exp}/summary.json",
        spm="data/{pair}/spm.model",
        source=lambda w: DATA.parallel_text(w.pair, w.split)[0],
        ref=lambda w: DATA.reference(w.pair, w.split),
    output:
        "results/curves/{pair}/{exp}.{split}.json",
    log:
        "logs/bleu_curve/{pair}.{exp}.{split}.log",
    conda:
        ENV
    threads: configured_threads("bleu_curve")
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        checkpoints=config["curves"]["checkpoints"],
        lang=lambda w: languages(w.pair)[1],
        decode=lambda w: PLAN.decode_args(w.pair),
    shell:
        "transformer-core bleu_curve --run-dir {params.run_dir:q} --spm {input.spm:q}"
        " --input {input.source:q} --ref {input.ref:q} --lang {params.lang:q}"
        " --checkpoints {params.checkpoints:q} {params.decode:q}"
        " --num-threads {threads:q} --out {output:q} > {log:q} 2>&1"
