"""Decoding settings chosen on the dev set (decoding.dev_choice, `decode_choice`, and the
commands that read the choice): the argmax of a recorded sweep, its ties, the record every
score and table carries, and bad grids and files refused in one line naming the key or file."""

import copy
import json
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, SMOKE

from transformer_core.data.registry import load_registry, parse_registry
from transformer_core.decoding.dev_choice import (
    GridPoint,
    choice_record,
    choose,
    grid_points,
    read_settings,
)
from transformer_core.errors import ConfigError, UserError
from transformer_core.tables.report import sweeps_markdown
from transformer_core.tables.translation import decode_origin, decoding_columns
from transformer_core.workflow_plan.config_checks import check_decoding, check_dev_splits


def point(alpha, bleu, beam=4):
    return {"beam": beam, "alpha": alpha, "sacrebleu": bleu, "bleu_paper_style": bleu + 1}


def test_the_choice_is_the_argmax_of_the_sweep_and_ties_go_to_the_paper_then_the_smaller_alpha():
    sweep = [point(0.0, 36.1), point(0.6, 37.4), point(1.0, 37.9), point(2.0, 38.2)]
    assert choose(sweep)["alpha"] == 2.0
    assert choose([*sweep, point(1.5, 38.2)])["alpha"] == 1.5  # a tie: the smaller alpha
    assert choose([point(0.3, 30.0), point(0.6, 30.0), point(1.0, 30.0)])["alpha"] == 0.6
    # Neither is the paper's point: the smaller alpha, whatever the beam.
    assert choose([point(0.6, 30.0, beam=8), point(1.0, 30.0)])["beam"] == 8
    assert choose([point(0.6, 30.0, beam=8), point(0.6, 30.0, beam=4)])["beam"] == 4
    assert choose([point(1.0, 30.0, beam=8), point(1.0, 30.0, beam=2)])["beam"] == 2
    with pytest.raises(UserError, match="no grid point"):
        choose([])


def test_grid_points_cover_only_the_settings_given_as_dev():
    grid = {"beam": [1, 4], "alpha": [0.0, 0.6]}
    assert grid_points(4, 0.6, grid) == []
    assert grid_points(4, "dev", grid) == [GridPoint(4, 0.0), GridPoint(4, 0.6)]
    assert grid_points("dev", 0.6, grid) == [GridPoint(1, 0.6), GridPoint(4, 0.6)]
    assert len(grid_points("dev", "dev", grid)) == 4
    for alpha in (0.0, 0.3, 1.0, 1e-05, 12.5):  # every value has one name that reads back
        assert GridPoint.parse(GridPoint(4, alpha).name) == GridPoint(4, alpha)
    assert GridPoint(4, 1).name == GridPoint(4, 1.0).name == "beam4-alpha1.0"
    with pytest.raises(UserError, match="not a grid point"):
        GridPoint.parse("beam4-alpha")


def write_score(path, sacrebleu, ratio=1.0):
    path.write_text(json.dumps({
        "sacrebleu": sacrebleu, "bleu_paper_style": sacrebleu + 0.8,
        "sacrebleu_stats": {"ratio": ratio, "hyp_len": int(1000 * ratio), "ref_len": 1000},
    }))  # fmt: skip
    return str(path)


def test_decode_choice_records_the_sweep_and_translate_and_score_read_it(tmp_path):
    points = [(0.0, 35.0, 0.93), (0.6, 36.5, 0.99), (1.0, 36.5, 1.01)]
    args = []
    for alpha, bleu, ratio in points:
        args += ["--point", "4", str(alpha), write_score(tmp_path / f"{alpha}.json", bleu, ratio)]
    out = tmp_path / "choice.json"
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_core", "decode_choice", "--beam", "4",
         "--alpha", "dev", *args, "--chosen-for", "en_de/base averaged", "--out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert (record["beam"], record["alpha"]) == (4, 0.6)  # tied with 1.0: the paper's
    assert record["from"] == {"beam": "config", "alpha": "dev"}
    assert record["chosen_for"] == "en_de/base averaged"
    assert [p["alpha"] for p in record["sweep"]] == [0.0, 0.6, 1.0]
    assert record["sweep"][0]["length_ratio"] == pytest.approx(0.93)
    assert record["largest_of_grid"] == [] and "note:" not in proc.stdout
    assert "alpha 0.6 (dev)" in proc.stdout

    # score records the settings beside the BLEU; the tables name them and their origin.
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a house .\n")
    ref.write_text("a house .\n")
    scored = tmp_path / "score.json"
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_core", "score", "--hyp", str(hyp), "--ref", str(ref),
         "--decoding", str(out), "--bootstrap-resamples", "0", "--out", str(scored)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    decoding = json.loads(scored.read_text())["decoding"]
    assert decoding == {
        "beam": 4, "alpha": 0.6, "from": {"beam": "config", "alpha": "dev"},
        "chosen_for": "en_de/base averaged",
    }  # fmt: skip
    assert decode_origin(decoding) == "alpha chosen on dev for en_de/base averaged"
    other = {**decoding, "alpha": 1.0}
    assert decoding_columns([1, 2], [{"decoding": decoding}, {"decoding": other}]) == {
        "beam": 4, "alpha": "1:0.6 2:1", "decode_from": decode_origin(decoding),
    }  # fmt: skip
    assert decoding_columns([1], [{}]) == {}  # a score made before decodings were recorded

    # translate takes the beam and alpha from the file, never from both places.
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_core", "translate", "--checkpoint", "x.pt",
         "--spm", "x.model", "--input", str(hyp), "--output", str(tmp_path / "o.txt"),
         "--decode-settings", str(out), "--alpha", "1.0"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"transformer-core translate: error: --decode-settings {out} gives the beam and alpha: "
        "leave out --alpha"
    ]

    report = sweeps_markdown({"en_de/base": str(out)})
    assert "| 4 | 0.6 (paper) | **36.50 (0.990)** |" in report
    assert "| 4 | 1 | 36.50 (1.010) |" in report


def test_a_choice_at_the_top_of_its_grid_says_so(tmp_path):
    # The Multi30k sweep of docs/multi30k.md: dev sacreBLEU rises up to the grid's last alpha.
    sweep = {0.0: 37.12, 0.3: 37.61, 0.6: 37.71, 1.0: 37.76, 1.5: 38.02, 2.0: 38.12}
    points = [
        (GridPoint(4, alpha), write_score(tmp_path / f"{alpha}.json", bleu))
        for alpha, bleu in sweep.items()
    ]
    record = choice_record(4, "dev", points, "en_de/base averaged")
    assert record["alpha"] == 2.0 and record["largest_of_grid"] == ["alpha"]
    path = tmp_path / "choice.json"
    path.write_text(json.dumps(record))
    assert "en_de/base: the chosen alpha is the grid's largest" in sweeps_markdown(
        {"en_de/base": str(path)}
    )


def test_settings_given_as_numbers_are_recorded_as_the_configurations(tmp_path):
    record = choice_record(4, 0.6, [], "en_de/base averaged")
    assert (record["beam"], record["alpha"], record["sweep"]) == (4, 0.6, [])
    assert record["from"] == {"beam": "config", "alpha": "config"}
    assert record["chosen_for"] is None and decode_origin(record) == "config"
    score = write_score(tmp_path / "s.json", 30.0)
    with pytest.raises(UserError, match="nothing to choose"):
        choice_record(4, 0.6, [(GridPoint(4, 0.6), score)], "x")
    with pytest.raises(UserError, match="no grid point's dev score"):
        choice_record(4, "dev", [], "x")
    with pytest.raises(UserError, match="decoded with beam 8, but the beam is 4"):
        choice_record(4, "dev", [(GridPoint(8, 0.6), score)], "x")
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(record))
    assert read_settings(path)["alpha"] == 0.6


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not a decoding settings file"),
        ('{"beam": 4, "alpha": 0.6}', "not a decoding settings file"),
        ('{"beam": 0, "alpha": 0.6, "from": {}}', "beam must be at least 1"),
        ('{"beam": 4, "alpha": NaN, "from": {}}', "alpha must be a number"),
        ('{"beam": 4, "alpha": Infinity, "from": {}}', "alpha must be a finite number"),
        ('{"beam": 4, "alpha": "0.6", "from": {}}', "alpha must be a number"),
    ],
)
def test_a_bad_settings_file_is_named(tmp_path, text, message):
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(UserError, match=f"^{path}: {message}"):
        read_settings(path)


def test_a_score_that_is_not_finite_cannot_choose(tmp_path):
    bad = tmp_path / "nan.json"
    bad.write_text('{"sacrebleu": NaN, "bleu_paper_style": 1.0}')
    with pytest.raises(UserError, match=f"^{bad}: sacrebleu is nan, not a finite number"):
        choice_record(4, "dev", [(GridPoint(4, 0.6), str(bad))], "x")


SMOKE_CONFIG = yaml.safe_load(SMOKE.read_text())


@pytest.mark.parametrize(
    ("grid", "key"),
    [
        ({"alpha": []}, r"decode.grid.alpha: give a non-empty list"),
        ({"alpha": [0.6, -1.0]}, r"decode.grid.alpha\[1\]: must be at least 0"),
        ({"alpha": [0.6, float("inf")]}, r"decode.grid.alpha\[1\]: must be a finite number"),
        ({"alpha": [0.6, "x"]}, r"decode.grid.alpha\[1\]: must be a number"),
        ({"alpha": [0.6, 0.6]}, r"decode.grid.alpha: \[0.6, 0.6\] holds a value twice"),
        ({"beam": [0]}, r"decode.grid.beam\[0\]: must be at least 1"),
        ({"beam": [4.5]}, r"decode.grid.beam\[0\]: must be an integer"),
        ({"beam": [True]}, r"decode.grid.beam\[0\]: must be an integer"),
        ({"beams": [4]}, r"decode.grid: unknown key\(s\) beams"),
        ([0.6], r"decode.grid: give a mapping"),
    ],
)
def test_bad_grids_are_refused_in_one_line_naming_the_key(grid, key):
    config = copy.deepcopy(SMOKE_CONFIG)
    config["decode"]["grid"] = grid
    with pytest.raises(ConfigError, match=f"^{key}"):
        check_decoding(config)


def test_dev_is_a_word_of_translation_decoding_on_pairs_with_a_dev_split():
    config = copy.deepcopy(SMOKE_CONFIG)
    config["decode"]["alpha"] = "Dev"
    with pytest.raises(ConfigError, match="^decode.alpha: 'Dev' is neither a number nor dev$"):
        check_decoding(config)
    config = copy.deepcopy(SMOKE_CONFIG)
    config["table4"]["decode"]["alpha"] = "dev"
    with pytest.raises(ConfigError, match="^table4.decode.alpha: dev is for translation"):
        check_decoding(config)
    registry = load_registry()
    check_dev_splits(SMOKE_CONFIG, registry.datasets)  # the smoke corpus has a dev section
    raw = yaml.safe_load((ROOT / "transformer_core" / "data" / "datasets.yaml").read_text())
    # A downloaded dataset that lists no dev part (a generated one must have a dev section).
    no_dev = copy.deepcopy(raw["datasets"]["multi30k_en_de"])
    no_dev["splits"]["dev"] = []
    raw["datasets"]["smoke_en_de"] = no_dev
    without_dev = parse_registry(raw)
    with pytest.raises(
        ConfigError,
        match="^decode.alpha: dev chooses on each pair's dev split, and pairs.en_de "
        r"\(dataset smoke_en_de\) has none; give decode.alpha a number$",
    ):
        check_dev_splits(SMOKE_CONFIG, without_dev.datasets)
    numbers = copy.deepcopy(SMOKE_CONFIG)
    numbers["decode"]["alpha"] = 0.6
    check_dev_splits(numbers, without_dev.datasets)  # nothing is chosen: no dev needed


def _decode_choice(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", "decode_choice", *map(str, args)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_decode_choice_never_writes_over_one_of_its_scores(tmp_path):
    score = write_score(tmp_path / "dev.json", 30.0)
    before = (tmp_path / "dev.json").read_text()
    proc = _decode_choice("--beam", 4, "--alpha", "dev", "--point", 4, 0.6, score,
                          "--chosen-for", "m", "--out", score)  # fmt: skip
    assert proc.returncode == 2 and "--out" in proc.stderr and "--point 4 0.6" in proc.stderr
    assert (tmp_path / "dev.json").read_text() == before


def test_a_score_is_filed_only_under_the_decoding_that_made_it(tmp_path):
    decoded_at = tmp_path / "at1.2.json"
    write_score(decoded_at, 30.0)
    record = json.loads(decoded_at.read_text())
    decoded_at.write_text(json.dumps({**record, "decoding": {"beam": 4, "alpha": 1.2}}))
    with pytest.raises(UserError, match="decoded with beam 4 and alpha 1.2, not the point's"):
        choice_record(4, "dev", [(GridPoint(4, 0.0), str(decoded_at))], "m")
    other = write_score(tmp_path / "other.json", 31.0)
    with pytest.raises(UserError, match="two scores for beam 4 alpha 0"):
        choice_record(4, "dev", [(GridPoint(4, 0.0), other), (GridPoint(4, -0.0), other)], "m")
    assert choice_record(4, "dev", [(GridPoint(4, 1.2), str(decoded_at))], "m")["alpha"] == 1.2


def test_minus_zero_is_zero_in_a_grid_and_in_a_file_name():
    (point,) = grid_points(4, "dev", {"beam": [4], "alpha": [-0.0]})
    assert point == GridPoint(4, 0.0) and point.name == "beam4-alpha0.0"
    assert GridPoint.parse(GridPoint(4, -0.0).name) == GridPoint(4, 0.0)
