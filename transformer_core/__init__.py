"""transformer_core: the library behind the reproduction of Vaswani et al. (2017).

Every stage of the pipeline (data, training, decoding, scoring, tables) is an
importable, unit-tested module here; the Snakemake workflow only calls the
``transformer-core`` command line, one subcommand per rule.
"""

__version__ = "0.1.0"
