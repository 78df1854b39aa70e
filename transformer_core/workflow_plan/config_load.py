"""The configuration as the workflow is read (workflow/rules/common.smk's one call): every
check in the order that gives each mistake its clearest one-line message, the schema's
defaults filled in and named, and this run's options recorded for the report's hints.

Plain Python with Snakemake's parts passed in (its ``validate``, its core count), so that the
package imports without Snakemake and ``load`` is unit-tested (tests/unit/test_config_load.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from transformer_core.data.registry import load_registry
from transformer_core.workflow_plan.config_checks import (
    check,
    check_cores,
    check_decoding,
    check_dev_splits,
    defaulted_keys,
)
from transformer_core.workflow_plan.config_facts import lookup, run_options
from transformer_core.workflow_plan.config_yaml import (
    check_unique_keys,
    check_values,
    type_nested_overrides,
)

# The key under which ``load`` records this run's options: added after every check, under a
# name the schema refuses from a configuration.
RUN_OPTIONS = "_run_options"


def load(
    config: dict[str, Any],
    *,
    configfiles: list[str],
    command_configfiles: list[str],
    overrides: dict[str, Any],
    cores: int | None,
    validate: Callable[[dict[str, Any]], None],
) -> None:
    """Check Snakemake's ``config`` and complete it in place (the dict the rules read).

    ``configfiles``: every configuration file read (``workflow.configfiles``);
    ``command_configfiles``: those given with --configfile (``workflow.overwrite_configfiles``);
    ``overrides``: the --config values alone (``workflow.config_settings.config``);
    ``cores``: --cores, None where the run has none (--lint, --report);
    ``validate``: the JSON schema's check, which fills in its defaults
    (``snakemake.utils.validate`` with the schema's path).

    The first mistake stops the run with a ConfigError naming its key. Keys the rules read
    that the configuration leaves out are named on stderr with the defaults they take.
    """
    # A key written twice: YAML keeps the last silently. A nested --config value: Snakemake's strings.
    check_unique_keys(configfiles)
    type_nested_overrides(config, overrides)
    check_values(config)  # before anything walks it: a YAML alias bomb stops here
    check_decoding(config)  # one line for a bad grid, before the schema's longer messages
    defaulted = defaulted_keys(config)  # before validate() fills them in
    validate(config)
    if defaulted:
        print(
            "config: not set in the configuration, the schema's defaults are used: "
            + ", ".join(f"{key}={lookup(config, key)[1]}" for key in defaulted),
            file=sys.stderr,
        )
    registry = load_registry()
    check(config, known_datasets=tuple(registry.datasets))
    check_dev_splits(config, registry.datasets)
    check_cores(cores)
    # For the hints that print a snakemake command (the report's "builds it",
    # workflow/report/workflow.rst, which sees only `config`).
    config[RUN_OPTIONS] = run_options(command_configfiles, dict(overrides))
