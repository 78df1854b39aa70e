# Reproduces Tables 2, 3 and 4 of "Attention Is All You Need" (Vaswani et al., 2017).
# Every rule is one `transformer-core` subcommand; see README.md for targets and configs.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/parsing.smk"
include: "workflow/rules/tables.smk"


rule all:
    default_target: True
    input:
        all_targets(),
