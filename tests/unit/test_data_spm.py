"""spm: bounded seeded sampling, joint BPE training with the project's special ids, encode/decode."""

import json
import subprocess
import sys

import pytest
import sentencepiece as spm

from transformer_core.data import bpe, smoke
from transformer_core.errors import UserError
from transformer_core.settings import SentencePieceSettings

SAMPLE_4000 = SentencePieceSettings(sample_size=4000, seed=1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    pairs = smoke.generate("de", 5, {"train": 3000})["train"]
    (folder / "train.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / "train.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def model(corpus):
    info = bpe.train([corpus / "train.en", corpus / "train.de"], 500, corpus / "bpe", SAMPLE_4000)
    return corpus / "bpe.model", info


def test_sample_is_bounded_seeded_and_from_both_files(corpus, tmp_path):
    inputs = [corpus / "train.en", corpus / "train.de"]
    info = bpe.sample_lines(inputs, 100, 3, tmp_path / "a")
    assert info == {"lines_total": 6000, "lines_sampled": 100}
    lines = (tmp_path / "a").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 100
    bpe.sample_lines(inputs, 100, 3, tmp_path / "b")
    bpe.sample_lines(inputs, 100, 4, tmp_path / "c")
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text()
    assert (tmp_path / "a").read_text() != (tmp_path / "c").read_text()
    english = set((corpus / "train.en").read_text(encoding="utf-8").splitlines())
    assert 0 < sum(line in english for line in lines) < 100  # drawn from both languages
    bpe.sample_lines(
        inputs, 10**6, 3, tmp_path / "all"
    )  # a sample larger than the data: everything
    assert len((tmp_path / "all").read_text().splitlines()) == 6000


def test_trained_model_special_ids_and_size(model):
    path, info = model
    assert info["lines_sampled"] == 4000 and info["lines_total"] == 6000
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert sp.get_piece_size() == 500
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2, 3)
    assert path.with_suffix(".vocab").is_file()
    assert info["model_sha256"] == bpe.sha256_of(path)


def test_training_is_deterministic(corpus, model, tmp_path):
    bpe.train(
        [corpus / "train.en", corpus / "train.de"],
        500,
        tmp_path / "again",
        SAMPLE_4000,
    )
    assert (tmp_path / "again.vocab").read_bytes() == model[0].with_suffix(".vocab").read_bytes()
    first = (tmp_path / "again.model").read_bytes()
    bpe.train(
        [corpus / "train.en", corpus / "train.de"],
        500,
        tmp_path / "again",
        SAMPLE_4000,
    )
    assert (tmp_path / "again.model").read_bytes() == first  # same command, same bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.model", "again.vocab"]


def test_too_large_vocabulary_is_a_user_error(corpus, tmp_path):
    with pytest.raises(UserError, match="vocab_size 100000"):
        bpe.train(
            [corpus / "train.en"], 100_000, tmp_path / "m", SentencePieceSettings(sample_size=200)
        )
    assert list(tmp_path.iterdir()) == []


def test_model_with_other_special_ids_is_rejected(corpus, tmp_path):
    spm.SentencePieceTrainer.train(
        input=str(corpus / "train.en"),
        model_prefix=str(tmp_path / "other"),
        vocab_size=200,
        minloglevel=2,
    )
    with pytest.raises(UserError, match="special ids"):
        bpe.load(tmp_path / "other.model")


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", "spm", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_train_encode_decode_roundtrip(corpus, tmp_path):
    result = cli(
        "train", "--input", corpus / "train.en", corpus / "train.de", "--vocab-size", 400,
        "--model-prefix", tmp_path / "m", "--sample-size", 3000, "--seed", 2, "--threads", 1,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["lines_sampled"] == 3000
    text = corpus / "train.de"
    for flag in ([], ["--ids"]):
        enc, dec = tmp_path / f"enc{len(flag)}", tmp_path / f"dec{len(flag)}"
        assert (
            cli(
                "encode", "--model", tmp_path / "m.model", "--input", text, "--output", enc, *flag
            ).returncode
            == 0
        )
        first = enc.read_text(encoding="utf-8").split("\n")[0].split()
        assert first[0].startswith("▁") if not flag else all(t.isdigit() for t in first)
        assert (
            cli(
                "decode", "--model", tmp_path / "m.model", "--input", enc, "--output", dec, *flag
            ).returncode
            == 0
        )
        assert dec.read_text(encoding="utf-8") == text.read_text(encoding="utf-8")


def test_script_splitting_decides_whether_a_bracket_joins_its_label(tmp_path):
    trees = tmp_path / "train.tree"
    trees.write_text("(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S\n" * 200)
    pieces = {}
    for flag in ("--split-by-unicode-script", "--no-split-by-unicode-script"):
        prefix = tmp_path / flag.strip("-")
        result = cli(
            "train", "--input", trees, "--vocab-size", 19, "--model-prefix", prefix,
            "--sample-size", 200, "--threads", 1, flag,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        processor = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
        pieces[flag] = processor.encode("(NP XX )NP", out_type=str)
    assert "▁(NP" not in pieces["--split-by-unicode-script"]
    assert pieces["--no-split-by-unicode-script"][0] == "▁(NP"


def test_cli_missing_model_is_a_clean_error(tmp_path):
    (tmp_path / "x").write_text("a\n")
    result = cli(
        "encode",
        "--model",
        tmp_path / "nope.model",
        "--input",
        tmp_path / "x",
        "--output",
        tmp_path / "y",
    )
    assert (
        result.returncode == 2
        and "Traceback" not in result.stderr
        and "nope.model" in result.stderr
    )
