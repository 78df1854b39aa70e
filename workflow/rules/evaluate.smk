# translate (beam search) -> score (paper-style BLEU and sacreBLEU); dev perplexity.


rule translate:
    input:
        checkpoint=checkpoint_of,
        spm="data/{pair}/spm.model",
        source=translate_source,
    output:
        "results/translations/{pair}/{exp}.{split}.{ckpt}.txt",
    params:
        beam=decode_setting("beam"),
        alpha=decode_setting("alpha"),
        max_len_a=decode_setting("max_len_a"),
        max_len_b=decode_setting("max_len_b"),
        max_tokens=decode_setting("max_tokens"),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        "logs/translate/{pair}.{exp}.{split}.{ckpt}.log",
    conda:
        ENV
    benchmark:
        "benchmarks/translate/{pair}.{exp}.{split}.{ckpt}.tsv"
    shell:
        "transformer-core translate --checkpoint {input.checkpoint} --spm {input.spm}"
        " --input {input.source} --output {output} --beam {params.beam} --alpha {params.alpha}"
        " --max-len-a {params.max_len_a} --max-len-b {params.max_len_b}"
        " --max-tokens {params.max_tokens} --num-threads {threads} > {log} 2>&1"


rule score:
    input:
        hyp="results/translations/{pair}/{exp}.{split}.{ckpt}.txt",
        ref=reference_of,
    output:
        "results/scores/{pair}/{exp}.{split}.{ckpt}.json",
    params:
        lang=target_lang,
    log:
        "logs/score/{pair}.{exp}.{split}.{ckpt}.log",
    conda:
        ENV
    shell:
        "transformer-core score --hyp {input.hyp} --ref {input.ref} --lang {params.lang}"
        " --out {output} > {log} 2>&1"


rule ppl:
    input:
        checkpoint="runs/{pair}/{exp}/last.pt",
        dev="data/{pair}/bin/dev.json",
    output:
        "results/ppl/{pair}/{exp}.dev.json",
    params:
        dev=input_prefix("dev"),
    threads: 1
    log:
        "logs/ppl/{pair}.{exp}.log",
    conda:
        ENV
    shell:
        "transformer-core ppl --checkpoint {input.checkpoint} --data {params.dev}"
        " --out {output} --num-threads {threads} > {log} 2>&1"
