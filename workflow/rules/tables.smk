# Table 3 rows (one file each) -> Table 3 (deltas, p-values, chart); Table 2; Table 4;
# the paper's attention figures; the report. Files for `snakemake --report` are marked
# by reported() (common.smk): only those that exist, so a report works after any run.


rule table3_row:
    input:
        unpack(lambda w: TABLES.table3_row_inputs(w.exp)),
    output:
        "results/table3/rows/{exp}.csv",
    log:
        "logs/table3_row/{exp}.log",
    conda:
        ENV
    params:
        runs=lambda w, input: TABLES.table3_row_args(w.exp, input),
    shell:
        "transformer-core table3_row --row {wildcards.exp:q} {params.runs:q}"
        " --out {output:q} > {log:q} 2>&1"


rule table3:
    input:
        unpack(lambda w: option_inputs(TABLES.table3())),
    output:
        csv=reported("results/table3.csv", "../report/table3.rst", "Tables"),
        markdown="results/table3.md",
        plot=reported(DELTAS_PLOT, "../report/table3_deltas.rst", "Plots"),
    log:
        "logs/table3.log",
    conda:
        ENV
    params:
        args=lambda w, input: option_args(TABLES.table3(), input),
        lang=languages(TABLE3_PAIR)[1],
        bootstrap=TABLES.bootstrap_args(),
    shell:
        "transformer-core table3 {params.args:q} --lang {params.lang:q} {params.bootstrap:q}"
        " --out {output.csv:q} --markdown {output.markdown:q} --plot {output.plot:q} > {log:q} 2>&1"


rule table2:
    input:
        unpack(lambda w: option_inputs(TABLES.table2())),
    output:
        csv=reported("results/table2.csv", "../report/table2.rst", "Tables"),
        markdown="results/table2.md",
    log:
        "logs/table2.log",
    conda:
        ENV
    params:
        results=lambda w, input: option_args(TABLES.table2(), input),
    shell:
        "transformer-core table2 {params.results:q} --out {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule table4:
    input:
        unpack(lambda w: option_inputs(TABLES.table4())),
    output:
        csv=reported("results/table4.csv", "../report/table4.rst", "Tables"),
        markdown="results/table4.md",
    log:
        "logs/table4.log",
    conda:
        ENV
    params:
        results=lambda w, input: option_args(TABLES.table4(), input),
    shell:
        "transformer-core table4 {params.results:q} --out {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule attention_figures:
    input:
        checkpoint=f"runs/{TABLE3_PAIR}/base/averaged.pt",
        spm=f"data/{TABLE3_PAIR}/spm.model",
    output:
        [
            reported(path, "../report/attention.rst", "Figures")
            for path in attention_figures().values()
        ],
    log:
        "logs/attention_figures.log",
    conda:
        ENV
    threads: configured_threads("attention_figures")
    params:
        figures=lambda w, output: figure_args(output),
    shell:
        "transformer-core attention --checkpoint {input.checkpoint:q} --spm {input.spm:q}"
        " {params.figures:q} --num-threads {threads:q} > {log:q} 2>&1"


rule report:
    input:
        unpack(lambda w: option_inputs(TABLES.report())),
    output:
        markdown=reported("results/report.md", "../report/report.rst", "Report"),
        plot=reported(
            "results/plots/learning_curves.png",
            "../report/learning_curves.rst",
            "Plots",
        ),
        curves=reported(
            "results/plots/bleu_curves.png", "../report/bleu_curves.rst", "Plots"
        ),
    log:
        "logs/report.log",
    conda:
        ENV
    params:
        args=lambda w, input: option_args(TABLES.report(), input),
        scale=config["scale"],
    shell:
        "transformer-core report --scale {params.scale:q} {params.args:q}"
        " --plot {output.plot:q} --curve-plot {output.curves:q} --out {output.markdown:q} > {log:q} 2>&1"
