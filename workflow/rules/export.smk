# export: an averaged model as a CTranslate2 model folder (the serve extra) or a transformers
# MarianMT folder (the hf extra), and the targets that export every Table 2 model. Not part of
# `all`: serving is not a table of the paper. exports/ belongs to the workflow: Snakemake deletes
# a directory() output before its job reruns, with anything a user put into it (transformer-core
# export run by hand refuses to replace a user's file; the rules cannot).


rule export:
    input:
        checkpoint="runs/{pair}/{exp}/averaged.pt",
        spm="data/{pair}/spm.model",
    output:
        directory("exports/{pair}/{exp}/ctranslate2-{quantization}"),
    log:
        "logs/export/{pair}.{exp}.{quantization}.log",
    conda:
        ENV
    shell:
        "transformer-core export --checkpoint {input.checkpoint:q} --spm {input.spm:q}"
        " --format ctranslate2 --quantization {wildcards.quantization:q} --out {output:q}"
        " > {log:q} 2>&1"


rule export_table2:
    input:
        TABLES.table2_exports(),


rule export_transformers:
    input:
        checkpoint="runs/{pair}/{exp}/averaged.pt",
        spm="data/{pair}/spm.model",
        score="results/scores/{pair}/{exp}.test.avg.json",
    output:
        directory("exports/{pair}/{exp}/transformers"),
    log:
        "logs/export/{pair}.{exp}.transformers.log",
    conda:
        ENV
    shell:
        "transformer-core export --checkpoint {input.checkpoint:q} --spm {input.spm:q}"
        " --format transformers --score {input.score:q} --out {output:q} > {log:q} 2>&1"


rule export_table2_transformers:
    input:
        TABLES.table2_exports("transformers"),
