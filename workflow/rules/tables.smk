# Table 3 rows (one file each) -> Table 3; Table 2; Table 4; the report.


rule table3_row:
    input:
        unpack(table3_row_inputs),
    output:
        "results/table3/rows/{exp}.csv",
    log:
        "logs/table3_row/{exp}.log",
    conda:
        ENV
    shell:
        "transformer-core table3_row --row {wildcards.exp:q} --score {input.score:q}"
        " --summary {input.summary:q} --out {output:q} > {log:q} 2>&1"


rule table3:
    input:
        table3_rows(),
    output:
        csv=report(
            "results/table3.csv",
            caption="../report/table3.rst",
            category="Tables",
        ),
        markdown="results/table3.md",
    log:
        "logs/table3.log",
    conda:
        ENV
    shell:
        "transformer-core table3 --rows {input:q} --out {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule table2:
    input:
        unpack(inputs_of(table2_options)),
    output:
        csv=report(
            "results/table2.csv",
            caption="../report/table2.rst",
            category="Tables",
        ),
        markdown="results/table2.md",
    log:
        "logs/table2.log",
    conda:
        ENV
    params:
        results=args_of(table2_options),
    shell:
        "transformer-core table2 {params.results:q} --out {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule table4:
    input:
        unpack(inputs_of(table4_options)),
    output:
        csv=report(
            "results/table4.csv",
            caption="../report/table4.rst",
            category="Tables",
        ),
        markdown="results/table4.md",
    log:
        "logs/table4.log",
    conda:
        ENV
    params:
        results=args_of(table4_options),
    shell:
        "transformer-core table4 {params.results:q} --out {output.csv:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule report:
    input:
        unpack(inputs_of(report_options)),
    output:
        markdown=report(
            "results/report.md",
            caption="../report/report.rst",
            category="Report",
        ),
        plot=report(
            "results/plots/learning_curves.png",
            caption="../report/learning_curves.rst",
            category="Learning curves",
        ),
    log:
        "logs/report.log",
    conda:
        ENV
    params:
        args=args_of(report_options),
        scale=config["scale"],
    shell:
        "transformer-core report --scale {params.scale:q} {params.args:q}"
        " --plot {output.plot:q} --out {output.markdown:q} > {log:q} 2>&1"
