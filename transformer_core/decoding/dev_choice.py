"""Decoding settings chosen on the development set, as the paper chose its beam and length
penalty ("chosen after experimentation on the development set", section 6.1).

Where a configuration's ``decode.beam`` or ``decode.alpha`` is ``dev``, the workflow decodes
a model's dev split once per point of ``decode.grid`` (one job each), scores each, and
``choose`` picks the point of the highest sacreBLEU; ties go to the paper's value (beam 4,
alpha 0.6), then to the smaller alpha, then to the smaller beam. The record it writes
(``choice_record``: the settings, where each came from, the whole sweep) is what the test
decode reads its beam and alpha from (``read_settings``), and what the tables and the report
show beside each score. A setting given as a number is recorded as coming from the
configuration, with no sweep, so that every score names the settings that made it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_core.errors import UserError
from transformer_core.settings import CHOSEN_FIELDS, DEV, DecodeSettings
from transformer_core.settings.fields import bounds_broken

CRITERION = "sacrebleu"  # the dev score the choice maximizes
PAPER = DecodeSettings()  # the paper's beam 4 and alpha 0.6: where scores tie
TIES = (
    f"equal dev {CRITERION}: the paper's value (beam {PAPER.beam}, alpha {PAPER.alpha}), then "
    "the smaller alpha, then the smaller beam"
)
_POINT = re.compile(r"beam([0-9]+)-alpha([0-9][0-9.e+-]*)")


@dataclass(frozen=True)
class GridPoint:
    """One beam size and length penalty of a sweep."""

    beam: int
    alpha: float

    def __post_init__(self) -> None:
        # -0.0 is 0.0: one point, one name (its files), whatever the configuration wrote.
        object.__setattr__(self, "alpha", float(self.alpha) + 0.0)

    @property
    def name(self) -> str:
        """The point in file names: ``beam4-alpha0.6`` (alpha as Python writes the float, so
        that every value has one name and reads back to itself)."""
        return f"beam{self.beam}-alpha{float(self.alpha)!r}"

    @classmethod
    def parse(cls, name: str) -> GridPoint:
        match = _POINT.fullmatch(name)
        if not match:
            raise UserError(f"{name!r} is not a grid point's name (beam<N>-alpha<X>)")
        return cls(int(match.group(1)), float(match.group(2)))


def is_dev(value: Any) -> bool:
    return value == DEV


def grid_points(beam: int | str, alpha: float | str, grid: dict[str, list]) -> list[GridPoint]:
    """The points to decode: ``grid``'s beams where ``beam`` is ``dev``, else ``beam`` alone,
    times ``grid``'s alphas where ``alpha`` is ``dev``, else ``alpha`` alone. Empty where
    neither is ``dev``: nothing to choose."""
    if not (is_dev(beam) or is_dev(alpha)):
        return []
    beams = grid["beam"] if is_dev(beam) else [beam]
    alphas = grid["alpha"] if is_dev(alpha) else [alpha]
    return [GridPoint(int(b), float(a)) for b in beams for a in alphas]


def _rank(item: dict[str, Any]) -> tuple:
    """Sort key of a sweep's points, best first (``TIES``)."""
    return (
        -item[CRITERION],
        item["beam"] != PAPER.beam or item["alpha"] != PAPER.alpha,
        item["alpha"],
        item["beam"],
    )


def choose(sweep: list[dict[str, Any]]) -> dict[str, Any]:
    """The point of ``sweep`` (items with ``beam``, ``alpha`` and the criterion's score) with
    the highest dev score; ties as ``TIES`` says."""
    if not sweep:
        raise UserError("no grid point to choose from")
    return min(sweep, key=_rank)


def sweep_item(point: GridPoint, score: dict[str, Any], path: str) -> dict[str, Any]:
    """One point of a sweep: its settings, both BLEU variants of its dev decode (a ``score``
    result read from ``path``), and the length ratio of its output to the reference."""
    ratio = (score.get("sacrebleu_stats") or {}).get("ratio")  # sacreBLEU's hyp / ref length
    return {
        "beam": point.beam,
        "alpha": point.alpha,
        "sacrebleu": score["sacrebleu"],
        "bleu_paper_style": score["bleu_paper_style"],
        "length_ratio": ratio,
        "score": path,
    }


def _read_json(path: str | os.PathLike, what: str) -> Any:
    """The JSON of ``path``, a ``what`` file; a UserError naming it where it is missing or cut."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: not a {what} ({err})") from None


def read_score(path: str | os.PathLike) -> dict[str, Any]:
    """A ``score`` result with finite BLEU values; otherwise a UserError naming the file."""
    score = _read_json(path, "score file of `score`")
    for key in (CRITERION, "bleu_paper_style"):
        value = score.get(key) if isinstance(score, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{path}: {key} is not a number ({value!r})")
        if not math.isfinite(value):
            raise UserError(f"{path}: {key} is {value}, not a finite number")
    return score


def choice_record(
    beam: int | str,
    alpha: float | str,
    points: list[tuple[GridPoint, str]],
    chosen_for: str,
) -> dict[str, Any]:
    """The decoding settings of a model: ``beam`` and ``alpha`` as configured (a number, or
    ``dev``), the dev score files of ``points`` where one is ``dev``, and ``chosen_for``, the
    model whose dev decodes they are (recorded where there is a sweep). Every point must match
    the configured numbers."""
    sweep, seen = [], {}
    for point, path in points:
        if not is_dev(beam) and point.beam != beam:
            raise UserError(f"{path}: decoded with beam {point.beam}, but the beam is {beam}")
        if not is_dev(alpha) and point.alpha != alpha:
            raise UserError(f"{path}: decoded with alpha {point.alpha}, but alpha is {alpha}")
        if point in seen:
            raise UserError(
                f"two scores for beam {point.beam} alpha {point.alpha:g}: {seen[point]} and "
                f"{path}; give each grid point once"
            )
        seen[point] = path
        score = read_score(path)
        recorded = score.get("decoding")
        if isinstance(recorded, dict) and (
            recorded.get("beam") != point.beam or recorded.get("alpha") != point.alpha
        ):  # the score's own record of how its translations were decoded wins
            raise UserError(
                f"{path}: its translations were decoded with beam {recorded.get('beam')!r} and "
                f"alpha {recorded.get('alpha')!r}, not the point's beam {point.beam} and alpha "
                f"{point.alpha:g}"
            )
        sweep.append(sweep_item(point, score, path))
    if (is_dev(beam) or is_dev(alpha)) and not sweep:
        raise UserError("a setting is `dev`, but no grid point's dev score was given (--point)")
    if not (is_dev(beam) or is_dev(alpha)) and sweep:
        raise UserError(f"beam {beam} and alpha {alpha} are given: there is nothing to choose")
    chosen = choose(sweep) if sweep else {"beam": beam, "alpha": alpha}
    # A choice at the top of its grid says the best value may lie beyond it.
    at_top = [
        key
        for key, setting in (("beam", beam), ("alpha", alpha))
        if is_dev(setting)
        and len({item[key] for item in sweep}) > 1
        and chosen[key] == max(item[key] for item in sweep)
    ]
    return {
        "beam": int(chosen["beam"]),
        "alpha": float(chosen["alpha"]),
        "from": {
            "beam": "dev" if is_dev(beam) else "config",
            "alpha": "dev" if is_dev(alpha) else "config",
        },
        "chosen_for": chosen_for if sweep else None,
        "criterion": CRITERION,
        "ties": TIES,
        "sweep": sorted(sweep, key=lambda item: (item["beam"], item["alpha"])),
        "largest_of_grid": at_top,
    }


def read_settings(path: str | os.PathLike) -> dict[str, Any]:
    """A record of ``choice_record``, its beam and alpha checked; a UserError names the file."""
    record = _read_json(path, "decoding settings file of `decode_choice`")
    if not isinstance(record, dict) or not isinstance(record.get("from"), dict):
        raise UserError(f"{path}: not a decoding settings file of `decode_choice`")
    checked_search(record, str(path))
    return record


def checked_search(record: Any, where: str) -> tuple[int, float]:
    """The beam and alpha of a decoding record (a settings file's, or a score's ``decoding``),
    checked with the decoding settings' own bounds; a UserError naming ``where`` otherwise."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: its decoding record is not a mapping, got {record!r:.60}")
    fields = {f.name: f for f in dataclasses.fields(DecodeSettings)}
    for name in CHOSEN_FIELDS:  # within the search's declared bounds
        if broken := bounds_broken(fields[name], record.get(name)):
            raise UserError(f"{where}: {name} {broken}, got {record.get(name)!r:.60}")
    return record["beam"], float(record["alpha"])


def decoding_summary(record: dict[str, Any]) -> dict[str, Any]:
    """What a score records of the settings that made it: beam, alpha, where each came from,
    and the model they were chosen for (the whole sweep stays in the settings file)."""
    return {key: record.get(key) for key in ("beam", "alpha", "from", "chosen_for")}


# Beside a translation file, the record of how translate decoded it (``record_translation``):
# score carries it without being told, and a card claims no search its score does not record.
RECORD_SUFFIX = ".decoding.json"


def record_translation(output: str | os.PathLike, beam: int, alpha: float, settings) -> None:
    """Write, beside the translation file ``output``, how it was decoded: ``beam`` and
    ``alpha``, from the settings file ``settings`` (its origins) or the command line, and the
    output's sha256 (a record of another file's translations is never read as this one's).
    Nothing where ``output`` is not a regular file (a device, a pipe)."""
    from transformer_core.files import atomic_write_text, destination, sha256_of

    target, through = destination(Path(output))
    if through:
        return
    origin = {"beam": "command line", "alpha": "command line"}
    summary = decoding_summary(read_settings(settings)) if settings else {}
    record = {
        "beam": int(beam),
        "alpha": float(alpha),
        "from": summary.get("from") or origin,
        "chosen_for": summary.get("chosen_for"),
        "translations_sha256": sha256_of(target),
    }
    atomic_write_text(f"{output}{RECORD_SUFFIX}", json.dumps(record, indent=2) + "\n")


def recorded_translation(hyp: str | os.PathLike) -> dict[str, Any] | None:
    """How the translation file ``hyp`` was decoded (``record_translation``'s record, as a
    score's ``decoding``), or None where no record of these very translations lies beside it."""
    from transformer_core.files import sha256_of

    path = Path(f"{hyp}{RECORD_SUFFIX}")
    if not path.is_file() or not Path(hyp).is_file():
        return None
    record = _read_json(path, "decoding record of `translate`")
    if not isinstance(record, dict) or record.get("translations_sha256") != sha256_of(hyp):
        return None
    checked_search(record, str(path))
    return decoding_summary(record)
