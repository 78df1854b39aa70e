"""``transformer-core decode_choice``: a model's beam and length penalty, as configured or
chosen on its dev decodes (``decoding.dev_choice``), as the JSON its test decode reads."""

from __future__ import annotations

import argparse
import json

from transformer_core.errors import UserError
from transformer_core.settings import DEV, word_or_number

HELP = (
    "Write a model's decoding settings: beam and alpha as given, or chosen on dev from the "
    "score files of a grid's decodes (highest sacreBLEU; ties: the paper's, then smaller alpha)."
)


_beam = word_or_number(DEV, int, 1)
_alpha = word_or_number(DEV, float, 0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--beam", type=_beam, required=True, help=f"the beam size, or {DEV}: chosen on the points"
    )
    parser.add_argument(
        "--alpha",
        type=_alpha,
        required=True,
        help=f"the length penalty, or {DEV}: chosen on the points",
    )
    parser.add_argument(
        "--point",
        nargs=3,
        action="append",
        default=[],
        metavar=("BEAM", "ALPHA", "SCORE_JSON"),
        help="a grid point and the `score` result of the dev split decoded with it; repeatable "
        f"(needed where --beam or --alpha is {DEV})",
    )
    parser.add_argument(
        "--chosen-for",
        required=True,
        metavar="LABEL",
        help="the model whose dev decodes these are (e.g. en_de/base avg), recorded",
    )
    parser.add_argument("--out", required=True, help="JSON output")


def run(args: argparse.Namespace) -> int:
    from transformer_core.commands import check_outputs
    from transformer_core.decoding.dev_choice import GridPoint, choice_record
    from transformer_core.files import atomic_write_text, check_not_inputs

    check_outputs({"--out": args.out})
    check_not_inputs(
        {"--out": args.out},
        {f"--point {beam} {alpha}": path for beam, alpha, path in args.point},
    )
    points = []
    for beam, alpha, path in args.point:
        try:
            values = _beam(beam), _alpha(alpha)
        except argparse.ArgumentTypeError as err:
            raise UserError(f"--point {beam} {alpha} {path}: {err}") from None
        if DEV in values:
            raise UserError(f"--point {beam} {alpha} {path}: a point's beam and alpha are numbers")
        points.append((GridPoint(*values), path))
    record = choice_record(args.beam, args.alpha, points, args.chosen_for)
    atomic_write_text(args.out, json.dumps(record, indent=2) + "\n")
    sweep = ", ".join(
        f"beam {item['beam']} alpha {item['alpha']:g}: {item['sacrebleu']:.2f}"
        for item in record["sweep"]
    )
    print(
        f"{args.chosen_for}: beam {record['beam']} ({record['from']['beam']}), alpha "
        f"{record['alpha']:g} ({record['from']['alpha']})"
        + (f"; dev sacreBLEU {sweep}" if sweep else "")
    )
    for key in record["largest_of_grid"]:
        print(f"note: the chosen {key} is the grid's largest; a wider grid may score higher")
    return 0
