# download -> prepare -> spm -> binarize, per language pair (parsing data: workflow/rules/parsing.smk).


rule download:
    output:
        expand(
            "data/{{src}}_{{tgt}}/raw/{split}.{lang}",
            split=["train", "dev", "test"],
            lang=["{src}", "{tgt}"],
        ),
        manifest="data/{src}_{tgt}/raw/manifest.json",
    log:
        "logs/download/{src}_{tgt}.log",
    benchmark:
        "benchmarks/download/{src}_{tgt}.tsv"
    conda:
        ENV
    params:
        dataset=dataset_of,
        mirror=mirror_arg,
        out=manifest_dir,
    shell:
        "transformer-core download --dataset {params.dataset:q} --out {params.out:q} {params.mirror:q} > {log:q} 2>&1"


rule prepare:
    input:
        src="data/{src}_{tgt}/raw/{split}.{src}",
        tgt="data/{src}_{tgt}/raw/{split}.{tgt}",
    output:
        src="data/{src}_{tgt}/prepared/{split}.src",
        tgt="data/{src}_{tgt}/prepared/{split}.tgt",
        report="data/{src}_{tgt}/prepared/{split}.report.json",
    log:
        "logs/prepare/{src}_{tgt}.{split}.log",
    conda:
        ENV
    params:
        filter=prepare_filter_arg,
    shell:
        "transformer-core prepare --src-in {input.src:q} --tgt-in {input.tgt:q}"
        " --src-out {output.src:q} --tgt-out {output.tgt:q} --report {output.report:q}"
        " --src-lang {wildcards.src:q} --tgt-lang {wildcards.tgt:q} {params.filter:q} > {log:q} 2>&1"


rule spm_train:
    input:
        spm_inputs,
    output:
        model="data/{pair}/spm.model",
        vocab="data/{pair}/spm.vocab",
    log:
        "logs/spm_train/{pair}.log",
    benchmark:
        "benchmarks/spm_train/{pair}.tsv"
    conda:
        ENV
    params:
        vocab_size=vocab_size,
        sample_size=spm_sample_size,
        prefix=output_prefix(".model"),
    shell:
        "transformer-core spm train --input {input:q} --vocab-size {params.vocab_size:q}"
        " --sample-size {params.sample_size:q} --model-prefix {params.prefix:q} > {log:q} 2>&1"


rule binarize:
    input:
        unpack(binarize_inputs),
    output:
        "data/{pair}/bin/{split}.json",
    log:
        "logs/binarize/{pair}.{split}.log",
    conda:
        ENV
    params:
        prefix=output_prefix(".json"),
    shell:
        "transformer-core binarize --spm {input.spm:q} --src {input.src:q} --tgt {input.tgt:q}"
        " --out-prefix {params.prefix:q} > {log:q} 2>&1"
