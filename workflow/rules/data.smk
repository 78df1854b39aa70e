# download -> prepare -> spm -> binarize, per language pair (parsing data: workflow/rules/parsing.smk).
#
# The training corpus of a language pair runs in shards (pairs.<pair>.shards,
# transformer_core/workflow_plan/data.py): shard_index cuts it into N line ranges, prepare_shard and binarize_shard
# run once per shard, in parallel, and prepare_report and merge_shards put the shards'
# filter counts and binarized arrays back together, in order, into the files one process
# over the whole corpus would write (data/<pair>/prepared/train.report.json,
# data/<pair>/bin/train.*).
# dev and test are small and stay whole. The result does not depend on N.


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
        dataset=lambda w: DATA.dataset(src_tgt(w)),
        mirror=DATA.mirror_args(),
        out=lambda w, output: os.path.dirname(output.manifest),
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
    wildcard_constraints:
        split="dev|test",  # train: prepare_shard, then prepare_report
    conda:
        ENV
    params:
        options=lambda w: DATA.prepare_options(src_tgt(w)),
    # Only training data is filtered; dev and test keep every line, so references never shift.
    shell:
        "transformer-core prepare --src-in {input.src:q} --tgt-in {input.tgt:q}"
        " --src-out {output.src:q} --tgt-out {output.tgt:q} --report {output.report:q}"
        " --src-lang {wildcards.src:q} --tgt-lang {wildcards.tgt:q} {params.options:q}"
        " --no-filter > {log:q} 2>&1"


rule shard_index:
    input:
        src="data/{src}_{tgt}/raw/train.{src}",
        tgt="data/{src}_{tgt}/raw/train.{tgt}",
    output:
        "data/{src}_{tgt}/shards/index.json",
    log:
        "logs/shards/{src}_{tgt}.index.log",
    conda:
        ENV
    params:
        shards=lambda w: DATA.shard_count(src_tgt(w)),
    shell:
        "transformer-core shards split --src {input.src:q} --tgt {input.tgt:q}"
        " --shards {params.shards:q} --out {output:q} > {log:q} 2>&1"


rule prepare_shard:
    input:
        src="data/{src}_{tgt}/raw/train.{src}",
        tgt="data/{src}_{tgt}/raw/train.{tgt}",
        index="data/{src}_{tgt}/shards/index.json",
    output:
        src="data/{src}_{tgt}/shards/prepared/{shard}.src",
        tgt="data/{src}_{tgt}/shards/prepared/{shard}.tgt",
        report="data/{src}_{tgt}/shards/prepared/{shard}.report.json",
    log:
        "logs/prepare/{src}_{tgt}.train.{shard}.log",
    benchmark:
        "benchmarks/prepare/{src}_{tgt}.train.{shard}.tsv"
    conda:
        ENV
    params:
        shard=lambda w: shard_args(w.shard),
        options=lambda w: DATA.prepare_options(src_tgt(w)),
    shell:
        "transformer-core prepare --src-in {input.src:q} --tgt-in {input.tgt:q}"
        " --shard-index {input.index:q} {params.shard:q}"
        " --src-out {output.src:q} --tgt-out {output.tgt:q} --report {output.report:q}"
        " --src-lang {wildcards.src:q} --tgt-lang {wildcards.tgt:q} {params.options:q}"
        " > {log:q} 2>&1"


rule prepare_report:
    input:
        lambda w: DATA.shard_reports(src_tgt(w)),
    output:
        "data/{src}_{tgt}/prepared/train.report.json",
    log:
        "logs/prepare/{src}_{tgt}.train.log",
    conda:
        ENV
    shell:
        "transformer-core shards report --reports {input:q} --out {output:q} > {log:q} 2>&1"


rule spm_train:
    input:
        lambda w: DATA.spm_inputs(w.pair),
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
        vocab_size=lambda w: DATA.vocab_size(w.pair),
        prefix=output_prefix(".model"),
        options=lambda w: DATA.spm_options(w.pair),
    shell:
        "transformer-core spm train --input {input:q} --vocab-size {params.vocab_size:q}"
        " --model-prefix {params.prefix:q}"
        " {params.options:q} > {log:q} 2>&1"


rule binarize:
    input:
        unpack(lambda w: DATA.binarize_inputs(w.pair, w.split)),
    output:
        "data/{pair}/bin/{split}.json",
    log:
        "logs/binarize/{pair}.{split}.log",
    conda:
        ENV
    threads: 1
    params:
        prefix=output_prefix(".json"),
    shell:
        "transformer-core binarize --spm {input.spm:q} --src {input.src:q} --tgt {input.tgt:q}"
        " --out-prefix {params.prefix:q} --threads {threads:q} > {log:q} 2>&1"


rule binarize_shard:
    input:
        spm="data/{pair}/spm.model",
        src="data/{pair}/shards/prepared/{shard}.src",
        tgt="data/{pair}/shards/prepared/{shard}.tgt",
    output:
        temp(multiext("data/{pair}/shards/bin/{shard}", *BINARIZED_SUFFIXES)),
    log:
        "logs/binarize/{pair}.train.{shard}.log",
    benchmark:
        "benchmarks/binarize/{pair}.train.{shard}.tsv"
    conda:
        ENV
    threads: 1
    params:
        prefix=output_prefix(".json"),
    shell:
        "transformer-core binarize --spm {input.spm:q} --src {input.src:q} --tgt {input.tgt:q}"
        " --out-prefix {params.prefix:q} --threads {threads:q} > {log:q} 2>&1"


# A language pair's binarized training split is its shards merged; parsing data
# (data/parse_*, not a configured pair) is binarized whole by `binarize`.
ruleorder: merge_shards > binarize


rule merge_shards:
    input:
        unpack(lambda w: DATA.merge_inputs(w.pair)),
    output:
        "data/{pair}/bin/train.json",
    log:
        "logs/binarize/{pair}.train.log",
    benchmark:
        "benchmarks/binarize/{pair}.train.tsv"
    wildcard_constraints:
        pair="|".join(config["pairs"]),
    conda:
        ENV
    params:
        parts=lambda w, input: split_prefixes(input, input.report),
        prefix=output_prefix(".json"),
    shell:
        "transformer-core shards merge --parts {params.parts:q} --out-prefix {params.prefix:q}"
        " --prepare-report {input.report:q} > {log:q} 2>&1"
