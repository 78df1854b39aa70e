"""The settings of scoring: sacreBLEU's bootstrap behind every interval and paired test
(``evaluation.significance``), and the checkpoints of a BLEU-against-steps curve
(``evaluation.curves``)."""

from __future__ import annotations

from dataclasses import dataclass

from transformer_core.settings.fields import SEEDS, option, parse_seed, require_declared

# sacreBLEU's own defaults (n_bootstrap, SACREBLEU_SEED). Its 95% interval drops resamples // 40
# at each end: fewer than 40 drop none (``evaluation.significance`` refuses them).
RESAMPLES, BOOTSTRAP_SEED, LEAST_RESAMPLES = 1000, 12345, 40


@dataclass(frozen=True)
class BootstrapSettings:
    """sacreBLEU's bootstrap resampling: every BLEU's 95% confidence interval (``score``) and
    Table 3's paired tests against base (``table3``); the workflow's ``bootstrap`` section."""

    resamples: int = option(
        RESAMPLES,
        "--bootstrap-resamples",
        "resamples of sacreBLEU's bootstrap: each score's confidence interval, Table 3's "
        "paired test against base (score: 0, no interval)",
        config="resamples",
        minimum=LEAST_RESAMPLES,
        off=0,
        doc="sacreBLEU's default; its 95 percent interval needs at least 40",
    )
    seed: int = option(
        BOOTSTRAP_SEED,
        "--bootstrap-seed",
        "seed of the resampling (sacreBLEU's SACREBLEU_SEED)",
        type=parse_seed,
        config="seed",
        minimum=0,
        maximum=SEEDS - 1,
        doc="sacreBLEU's default",
    )

    def __post_init__(self) -> None:
        require_declared(self, lambda f: f.metadata["flag"])


@dataclass(frozen=True)
class CurveSettings:
    """The BLEU-against-steps curve of a run (``bleu_curve``; the workflow's ``curves``)."""

    checkpoints: int = option(
        5,
        "--checkpoints",
        "decode at most this many kept checkpoints, evenly spaced, the last among them",
        minimum=1,
        doc="of each Table 2 run, on the dev split, for the report's plot (a run keeps "
        "models.<preset>.average_last checkpoints, the end of its training)",
    )

    def __post_init__(self) -> None:
        require_declared(self, lambda f: f.metadata["flag"])
