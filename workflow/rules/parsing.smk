# Table 4 (English constituency parsing): treebank -> [merge with a parsed corpus] -> the
# translation rules (spm_train, binarize, train, average, translate) on data/parse_*/ ->
# delinearize (repair) -> evalb. DataPlan (transformer_core/workflow_plan/data.py) gives those
# rules the treebank's words (source) and linearized trees (target) for the parse_* folders.


rule treebank:
    input:
        lambda w: DATA.treebank_source(),
    output:
        expand(
            "data/parse_treebank/treebank/{split}.{ext}",
            split=["train", "dev", "test"],
            ext=["words", "tree"],
        ),
        expand(
            "data/parse_treebank/treebank/{split}.{ext}",
            split=["dev", "test"],
            ext=["tags", "gold"],
        ),
    log:
        "logs/treebank/parse_treebank.log",
    conda:
        ENV
    params:
        action=lambda w: DATA.treebank_action(),
        out=output_dir,
    shell:
        "transformer-core treebank {params.action:q} --out {params.out:q} > {log:q} 2>&1"


rule treebank_merge:
    input:
        treebank_words="data/parse_treebank/treebank/train.words",
        treebank_tree="data/parse_treebank/treebank/train.tree",
        corpus_words=lambda w: DATA.semi_supervised_file("words"),
        corpus_tree=lambda w: DATA.semi_supervised_file("tree"),
    output:
        "data/parse_semi/treebank/train.words",
        "data/parse_semi/treebank/train.tree",
    log:
        "logs/treebank/parse_semi.log",
    conda:
        ENV
    params:
        treebank=input_dir("treebank_words"),
        corpus=input_dir("corpus_words"),
        out=output_dir,
        linearization=lambda w: DATA.linearization_args(),
    shell:
        "transformer-core treebank merge --treebank {params.treebank:q} --corpus {params.corpus:q}"
        " --out {params.out:q} {params.linearization:q} > {log:q} 2>&1"


rule delinearize:
    input:
        pred="results/translations/{pair}/{exp}.{split}.{ckpt}.txt",
        words=lambda w: DATA.treebank_file(w.pair, w.split, "words"),
        tags=lambda w: DATA.treebank_file(w.pair, w.split, "tags"),
    output:
        "results/parses/{pair}/{exp}.{split}.{ckpt}.tree",
    log:
        "logs/delinearize/{pair}.{exp}.{split}.{ckpt}.log",
    wildcard_constraints:
        pair="parse_[a-z]+",
    conda:
        ENV
    params:
        linearization=lambda w: DATA.linearization_args(),
    shell:
        "transformer-core treebank delinearize --words {input.words:q} --pred {input.pred:q}"
        " --tags {input.tags:q} --out {output:q} {params.linearization:q} > {log:q} 2>&1"


rule evalb:
    input:
        gold=lambda w: DATA.treebank_file(w.pair, w.split, "gold"),
        test="results/parses/{pair}/{exp}.{split}.{ckpt}.tree",
    output:
        json="results/evalb/{pair}/{exp}.{split}.{ckpt}.json",
        report="results/evalb/{pair}/{exp}.{split}.{ckpt}.txt",
    log:
        "logs/evalb/{pair}.{exp}.{split}.{ckpt}.log",
    wildcard_constraints:
        pair="parse_[a-z]+",
    conda:
        ENV
    shell:
        "transformer-core evalb --gold {input.gold:q} --test {input.test:q} --out {output.report:q}"
        " --json {output.json:q} > {log:q} 2>&1"
