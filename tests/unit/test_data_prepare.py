"""prepare: normalization, counted filters, the JSON report and stderr summary, mismatched inputs."""

import json
import subprocess
import sys

import pytest

from transformer_core.data.prepare import Normalizer, prepare_corpus, reject_reason
from transformer_core.errors import UserError
from transformer_core.settings import PrepareSettings


def clean(lang, line, form="NFC"):
    return Normalizer(lang, form).clean(line)[0]


def test_unicode_normalization_composes():
    assert clean("de", "Mu\u0308ller") == "Müller"  # NFC: u + combining diaeresis -> ü
    assert clean("en", "\ufb01ne", "NFKC") == "fine"  # NFKC folds the fi ligature
    assert clean("en", "\ufb01ne", "NFC") == "\ufb01ne"


def test_moses_punctuation_normalization():
    assert clean("de", "„Hallo“ sagte er") == '"Hallo" sagte er'
    assert clean("en", "a  – b") == "a - b"
    assert clean("en", "world ; « quoted »") == 'world; " quoted "'


def test_non_printing_characters_removed_and_whitespace_collapsed():
    line = "zero\u200bwidth\x07 bell\tand\u2028sep "
    assert Normalizer("en").clean(line) == ("zerowidth bell and sep", 2)


@pytest.mark.parametrize(
    "src, tgt, reason",
    [
        ("", "Hallo", "empty"),
        ("a " * 251, "b " * 251, "too_long"),
        ("a " * 250, "b " * 250, None),
        ("one two three four", "eins zwei", "ratio"),
        ("one two three", "eins zwei", None),  # 1.5 is allowed
        ("one two", "eins zwei drei", None),
    ],
)
def test_reject_reason(src, tgt, reason):
    assert reject_reason(src, tgt, 250, 1.5) == reason


def write_pair(tmp_path, src_lines, tgt_lines):
    src, tgt = tmp_path / "in.en", tmp_path / "in.de"
    src.write_text("".join(line + "\n" for line in src_lines), encoding="utf-8")
    tgt.write_text("".join(line + "\n" for line in tgt_lines), encoding="utf-8")
    return src, tgt


SRC = ["Hello world .", "", "a b c d e f", "long " * 300, "The  cat\u200b sleeps .", "ok"]
TGT = ["Hallo Welt .", "Leer", "a b", "lang " * 300, "Die Katze schläft .", ""]


def test_filters_counted_never_silent(tmp_path):
    src, tgt = write_pair(tmp_path, SRC, TGT)
    report = prepare_corpus(src, tgt, tmp_path / "o.en", tmp_path / "o.de", PrepareSettings())
    assert (tmp_path / "o.en").read_text().split("\n") == ["Hello world .", "The cat sleeps .", ""]
    assert (tmp_path / "o.de").read_text().split("\n") == [
        "Hallo Welt .",
        "Die Katze schläft .",
        "",
    ]
    assert report["pairs_in"] == 6 and report["pairs_out"] == 2
    assert report["removed"] == {"empty": 2, "too_long": 1, "ratio": 1}
    assert report["removed_total"] == 4
    assert report["nonprinting_chars_removed"] == {"src": 1, "tgt": 0}


def test_worker_processes_give_the_same_output(tmp_path, monkeypatch):
    monkeypatch.setattr("transformer_core.data.prepare.CHUNK_LINES", 2)  # several chunks
    src, tgt = write_pair(tmp_path, SRC * 3, TGT * 3)
    one = prepare_corpus(src, tgt, tmp_path / "1.en", tmp_path / "1.de", PrepareSettings())
    two = prepare_corpus(
        src, tgt, tmp_path / "2.en", tmp_path / "2.de", PrepareSettings(), workers=2
    )
    assert (tmp_path / "1.en").read_text() == (tmp_path / "2.en").read_text()
    assert (tmp_path / "1.de").read_text() == (tmp_path / "2.de").read_text()
    assert {k: v for k, v in one.items() if k != "outputs"} == {
        k: v for k, v in two.items() if k != "outputs"
    }
    assert one["pairs_out"] == 6


def test_no_filter_keeps_every_line(tmp_path):
    src, tgt = write_pair(tmp_path, SRC, TGT)
    report = prepare_corpus(
        src, tgt, tmp_path / "o.en", tmp_path / "o.de", PrepareSettings(filter=False)
    )
    assert report["pairs_out"] == 6 and report["removed_total"] == 0
    assert (tmp_path / "o.en").read_text().count("\n") == 6


def test_lowercase_and_tokenize_make_the_multi30k_literatures_text(tmp_path):
    src, tgt = write_pair(tmp_path, ['A "Big" dog.', "Zwei Männer"], ['Ein "großer" Hund.', "x"])
    settings = PrepareSettings(filter=False, lowercase=True, tokenize=True)
    prepare_corpus(src, tgt, tmp_path / "o.en", tmp_path / "o.de", settings)
    assert (tmp_path / "o.en").read_text().splitlines() == [
        "a &quot; big &quot; dog .",
        "zwei männer",
    ]
    assert (tmp_path / "o.de").read_text().splitlines()[0] == "ein &quot; großer &quot; hund ."


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    src, tgt = write_pair(tmp_path, ["a", "b", "c"], ["x"])
    with pytest.raises(UserError) as err:
        prepare_corpus(src, tgt, tmp_path / "o.en", tmp_path / "o.de", PrepareSettings())
    assert f"{src} has 3 lines, {tgt} has 1" in str(err.value)
    assert not (tmp_path / "o.en").exists()
    src, tgt = write_pair(tmp_path, ["a"], ["x", "y"])
    with pytest.raises(UserError, match=r"has 1 lines, .* has 2"):
        prepare_corpus(src, tgt, tmp_path / "o.en", tmp_path / "o.de", PrepareSettings())


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", "prepare", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_report_and_summary(tmp_path):
    src, tgt = write_pair(tmp_path, SRC, TGT)
    report_path = tmp_path / "r" / "report.json"
    result = cli(
        "--src-in", src, "--tgt-in", tgt, "--src-out", tmp_path / "o.en", "--tgt-out", tmp_path / "o.de",
        "--report", report_path, "--src-lang", "en", "--tgt-lang", "de", "--max-len", 200, "--max-ratio", 3,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    assert report["settings"]["max_ratio"] == 3 and report["settings"]["max_len"] == 200
    assert report["removed"] == {"empty": 2, "too_long": 1, "ratio": 0}
    assert "6 pairs in, 3 out, 3 removed (50.00%: empty 2, too_long 1, ratio 0)" in result.stderr


def test_cli_mismatch_is_a_clean_error(tmp_path):
    src, tgt = write_pair(tmp_path, ["a", "b"], ["x"])
    result = cli(
        "--src-in", src, "--tgt-in", tgt, "--src-out", tmp_path / "o.en", "--tgt-out", tmp_path / "o.de",
        "--report", tmp_path / "r.json",
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{src} has 2 lines, {tgt} has 1" in result.stderr
