"""The search settings of decoding (``decoding/search.py``): the paper's translation search
by default, and its parsing search."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from transformer_core.errors import UserError
from transformer_core.parsing.trees import LINEARIZATIONS
from transformer_core.settings.fields import flagged_fields, option, require_declared
from transformer_core.settings.flags import command_flags


@dataclass(frozen=True)
class DecodeSettings:
    """Search settings (``decoding/search.py``); the defaults are the paper's translation setup,
    and the CLI's (``translate``, ``bleu_curve``; the workflow's ``decode`` sections, through
    ``decode_flags``). The maximum output length is ``max_len_a * source length + max_len_b``;
    ``min_len`` forbids EOS before that many real tokens (0 for the paper's decoding;
    benchmarks use it to force equal output lengths)."""

    # ``dev``: the workflow may choose it on the dev split (decoding.dev_choice), by default from
    # these values (decode.grid); ``required``: a configuration's decode section gives it.
    beam: int = option(
        4, "--beam", "beam size; 1 is greedy", minimum=1, dev=(4,), required=True,
        doc="Paper: 4 (translation), 21 (parsing)",
    )  # fmt: skip
    # At most 10: the penalty of a long output then stays finite in fp32 ((5 + 1024) / 6)^10 is
    # 2e22); beyond, it overflows (alpha 60 did); the paper's is 0.6, Table 4's 0.3.
    alpha: float = option(
        0.6, "--alpha", "length penalty ((5+|Y|)/6)^alpha, 0 to 10", minimum=0, maximum=10,
        dev=(0.0, 0.3, 0.6, 1.0, 1.5, 2.0), required=True, doc="GNMT's length penalty. Paper: 0.6, chosen on "
        "newstest2013 (translation), 0.3 (parsing)",
    )  # fmt: skip
    max_len_a: float = option(
        1.0, "--max-len-a", "maximum output length = a * source length + b: a", minimum=0,
        required=True,
    )  # fmt: skip
    max_len_b: int = option(
        50, "--max-len-b", "b of the maximum output length", required=True,
        doc="Paper: a 1 and b 50 (translation), b 300 (parsing)",
    )  # fmt: skip
    tree_constraint: str | None = option(
        None,
        "--tree-constraint",
        "parsing: extend hypotheses only into well-formed trees of this linearization, with one "
        "leaf per source word; under words each leaf is the source's next word, copied "
        "(transformer_core/parsing/constraint.py; the paper decodes without it)",
        type=str,
        choices=LINEARIZATIONS,
        schema={
            "type": "boolean",
            "default": False,
            "description": "search only well-formed trees with one leaf per input word, of "
            "table4.linearization (translate --tree-constraint; the paper decodes without it)",
        },
    )
    min_len: int = option(0, None, "")

    def __post_init__(self) -> None:
        require_declared(self, lambda f: f.metadata["flag"])
        for name in ("alpha", "max_len_a"):  # NaN or infinity makes every output one word
            if not 0 <= (value := getattr(self, name)) < math.inf:
                raise UserError(f"--{name.replace('_', '-')} must be finite and >= 0, got {value}")
        if 2 * self.max_len_a + self.max_len_b < 1:  # a one-word source: its piece and EOS
            raise UserError(f"--max-len-a {self.max_len_a} --max-len-b {self.max_len_b}: a "
                            "one-word source (2 tokens) would get no output token")  # fmt: skip


# The fields a decode-choice file gives (``option(dev=True)``): the workflow's ``dev`` value.
CHOSEN_FIELDS = tuple(f.name for f in dataclasses.fields(DecodeSettings) if "dev" in f.metadata)

# The paper's parsing search (section 6.3): beam 21, alpha 0.3, maximum output length input + 300.
PARSING_SEARCH = DecodeSettings(beam=21, alpha=0.3, max_len_b=300)


def decode_fields() -> list[dataclasses.Field]:
    """The ``DecodeSettings`` fields that have a command-line flag, in declaration order."""
    return flagged_fields(DecodeSettings)


def decode_flags(settings: dict[str, Any]) -> list[str]:
    """``settings`` (a config's ``decode`` section) as the search flags of ``translate``."""
    return command_flags(DecodeSettings, settings)
