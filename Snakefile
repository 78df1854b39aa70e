# Reproduces Tables 2, 3 and 4 of "Attention Is All You Need" (Vaswani et al., 2017).
# Every rule is one `transformer-core` subcommand; see README.md for targets and configs.
import os

from snakemake.utils import min_version

min_version("9.0")


# The paper's configuration, unless one is given: `--configfile config/smoke.yaml` replaces
# it rather than extending it, so each scale's file stands alone (a key it leaves out takes
# the schema's documented default, never the paper's value; see config/README.md).
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/parsing.smk"
include: "workflow/rules/tables.smk"


rule all:
    default_target: True
    input:
        TABLES.all_targets(),
