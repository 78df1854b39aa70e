# translate (beam search) -> score (paper-style BLEU and sacreBLEU, with bootstrap intervals);
# decode_choice: a model's beam and alpha, as configured or chosen on its dev decodes, one per
# point of decode.grid (translate and score with the {point} suffix, .beam4-alpha0.6; the
# decodes without it read their beam and alpha from the choice); bleu_curve: the dev BLEU of a
# run's kept checkpoints (BLEU against steps, in the report).


rule translate:
    input:
        checkpoint=lambda w: checkpoint_path(w.pair, w.exp, w.ckpt),
        spm="data/{pair}/spm.model",
        source=lambda w: DATA.parallel_text(w.pair, w.split)[0],
        settings=decode_settings_input,
    output:
        "results/translations/{pair}/{exp}.{split}.{ckpt}{point}.txt",
    log:
        "logs/translate/{pair}.{exp}.{split}.{ckpt}{point}.log",
    benchmark:
        "benchmarks/translate/{pair}.{exp}.{split}.{ckpt}{point}.tsv"
    conda:
        ENV
    threads: configured_threads("translate")
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        decode=decode_args,
        settings=lambda w, input: settings_flag("--decode-settings", input),
        detokenize=lambda w: DATA.detokenize_args(w.pair),
    shell:
        "transformer-core translate --checkpoint {input.checkpoint:q} --spm {input.spm:q}"
        " --input {input.source:q} --output {output:q} {params.settings:q} {params.decode:q}"
        " {params.detokenize:q} --num-threads {threads:q} > {log:q} 2>&1"


rule score:
    input:
        hyp="results/translations/{pair}/{exp}.{split}.{ckpt}{point}.txt",
        ref=lambda w: DATA.reference(w.pair, w.split),
        settings=decode_settings_input,
    output:
        "results/scores/{pair}/{exp}.{split}.{ckpt}{point}.json",
    log:
        "logs/score/{pair}.{exp}.{split}.{ckpt}{point}.log",
    conda:
        ENV
    params:
        lang=lambda w: languages(w.pair)[1],
        bootstrap=lambda w: TABLES.bootstrap_args(w.point),
        decoding=lambda w, input: settings_flag("--decoding", input),
    shell:
        "transformer-core score --hyp {input.hyp:q} --ref {input.ref:q} --lang {params.lang:q}"
        " {params.decoding:q} {params.bootstrap:q} --out {output:q} > {log:q} 2>&1"


rule decode_choice:
    input:
        unpack(lambda w: PLAN.decode_choice_inputs(w.pair, w.exp, w.ckpt)),
    output:
        "results/decode_choice/{pair}/{exp}.{ckpt}.json",
    log:
        "logs/decode_choice/{pair}.{exp}.{ckpt}.log",
    localrule: True
    conda:
        ENV
    params:
        setting=lambda w: PLAN.decode_choice_setting(w.pair, w.exp, w.ckpt),
        points=lambda w, input: PLAN.decode_choice_points(w.pair, input),
    shell:
        "transformer-core decode_choice {params.setting:q} {params.points:q} --out {output:q}"
        " > {log:q} 2>&1"


rule bleu_curve:
    input:
        summary="runs/{pair}/{exp}/summary.json",
        spm="data/{pair}/spm.model",
        source=lambda w: DATA.parallel_text(w.pair, w.split)[0],
        ref=lambda w: DATA.reference(w.pair, w.split),
        settings=lambda w: PLAN.decode_choice_path(w.pair, w.exp, "avg"),
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
        decode=decode_args,
        detokenize=lambda w: DATA.detokenize_args(w.pair),
    shell:
        "transformer-core bleu_curve --run-dir {params.run_dir:q} --spm {input.spm:q}"
        " --input {input.source:q} --ref {input.ref:q} --lang {params.lang:q}"
        " --checkpoints {params.checkpoints:q} --decode-settings {input.settings:q}"
        " {params.decode:q} {params.detokenize:q}"
        " --num-threads {threads:q} --out {output:q} > {log:q} 2>&1"
