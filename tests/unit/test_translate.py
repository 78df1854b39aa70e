"""translate: line order and empty lines kept, token batching, clear errors, the CLI end to end."""

import json
import subprocess
import sys

import pytest
import sentencepiece as spm
import torch
from conftest import tiny_config, tiny_model, train_spm
from corpora import generated_sentences

from transformer_core.cli import build_parser, main
from transformer_core.commands import decode_options
from transformer_core.data.moses import detokenize
from transformer_core.decoding.search import beam_search
from transformer_core.decoding.translate import check_vocabulary, make_batches
from transformer_core.device import AUTO_COMPILE
from transformer_core.errors import UserError
from transformer_core.model.checkpoint import save_checkpoint
from transformer_core.settings import DecodeSettings

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("spm") / "tiny.model"
    return train_spm(path, generated_sentences(400), 60)


def make_checkpoint(path, vocab_size, **overrides):
    """Save a sharp tiny model (one layer a side, 128 positions) to ``path``; return the model."""
    cfg = tiny_config(
        **{
            "encoder_layers": 1,
            "decoder_layers": 1,
            "max_positions": 128,
            "vocab_size": vocab_size,
            **overrides,
        }
    )
    model = tiny_model(cfg, sharp=True)
    save_checkpoint(path, cfg, model.state_dict())
    return model


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "transformer_core", "translate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_translate_keeps_line_order_and_empty_lines(tmp_path, spm_model):
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    model = make_checkpoint(tmp_path / "model.pt", sp.get_piece_size())
    lines = generated_sentences(14, seed=1)
    lines[3] = ""
    lines[8] = "   "
    lines.append("")
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = cli(
        "--checkpoint",
        tmp_path / "model.pt",
        "--spm",
        spm_model,
        "--input",
        tmp_path / "in.txt",
        "--output",
        tmp_path / "out.txt",
        "--max-tokens",
        30,
        "--max-len-b",
        4,
        "--device",
        "cpu",
        "--num-threads",
        1,
    )
    assert result.returncode == 0, result.stderr
    assert f"{len(lines)}/{len(lines)} sentences" in result.stderr
    why = AUTO_COMPILE["decode"]["cpu"][1]
    assert f"eager step (--compile auto: {why})" in result.stderr  # which path, and why
    out = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert out[-1] == ""  # the file ends with a newline
    out = out[:-1]
    assert len(out) == len(lines)
    expected = []
    for line in lines:
        ids = sp.encode(line)
        if not ids:
            expected.append("")
            continue
        [hyp] = beam_search(model, torch.tensor([ids + [3]]), beam=4, alpha=0.6, max_len_b=4)
        expected.append(sp.decode(hyp))
    assert out == expected
    assert out[3] == out[8] == out[-1] == ""
    assert len(set(expected)) >= 10  # outputs differ: a shifted line would show
    # A model of Moses-tokenized text (prepare --tokenize) writes running text on request.
    out_txt, text_txt = str(tmp_path / "out.txt"), str(tmp_path / "text.txt")
    args = [text_txt if a == out_txt else a for a in result.args[4:]]
    assert cli(*args, "--detokenize", "de").returncode == 0
    text = (tmp_path / "text.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert text == [detokenize(line, "de") for line in expected]


def test_make_batches_respects_max_tokens_and_covers_every_sentence():
    lengths = [5, 12, 3, 12, 40, 7, 7, 1, 9]
    batches = make_batches(lengths, max_tokens=24)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [4]  # longer than max_tokens: alone
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * longest <= 24
        assert lengths[batch[0]] == longest
    assert [lengths[i] for b in batches for i in b] == sorted(lengths, reverse=True)
    assert batches[1] == [1, 3]  # equal lengths keep input order
    with pytest.raises(UserError, match="max-tokens"):
        make_batches(lengths, 0)


def test_cli_defaults_are_the_papers_and_a_bad_beam_fails_first(tmp_path, capsys):
    args = build_parser().parse_args(
        ["translate", "--checkpoint", "c", "--spm", "s", "--input", "i", "--output", "o"]
    )
    assert decode_options(args) == DecodeSettings()
    # Checked before any file is looked at (the checkpoint and the input do not exist).
    code = main(
        [
            "translate",
            "--checkpoint",
            str(tmp_path / "no.pt"),
            "--spm",
            "s",
            "--input",
            str(tmp_path / "no.txt"),
            "--output",
            str(tmp_path / "out.txt"),
            "--beam",
            "0",
        ]
    )
    assert code == 2 and "--beam must be at least 1, got 0" in capsys.readouterr().err


def test_source_too_long_for_learned_positions_names_the_line(tmp_path, spm_model):
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    make_checkpoint(
        tmp_path / "model.pt", sp.get_piece_size(), positional="learned", max_positions=12
    )
    (tmp_path / "in.txt").write_text(
        "the cat\n" + " ".join(["green river"] * 10) + "\n", encoding="utf-8"
    )
    result = cli(
        "--checkpoint",
        tmp_path / "model.pt",
        "--spm",
        spm_model,
        "--input",
        tmp_path / "in.txt",
        "--output",
        tmp_path / "out.txt",
        "--device",
        "cpu",
    )
    assert result.returncode == 2
    assert "in.txt: line 2 has" in result.stderr and "max_positions" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.txt").exists()


def test_vocabulary_mismatch_is_a_user_error(tmp_path, spm_model):
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    small = make_checkpoint(tmp_path / "model.pt", vocab_size=20)  # fewer ids than the spm model
    with pytest.raises(UserError, match="pieces, more than the model's vocab_size=20"):
        check_vocabulary(small, sp, spm_model)
    other_ids = make_checkpoint(tmp_path / "model.pt", sp.get_piece_size(), pad_id=3, eos_id=0)
    with pytest.raises(UserError, match="special ids"):
        check_vocabulary(other_ids, sp, spm_model)
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    result = cli(
        "--checkpoint",
        tmp_path / "model.pt",
        "--spm",
        tmp_path / "in.txt",
        "--input",
        tmp_path / "in.txt",
        "--output",
        tmp_path / "out.txt",
        "--device",
        "cpu",
    )
    assert result.returncode == 2 and "cannot load sentencepiece model" in result.stderr


@pytest.mark.parametrize("linearization, missing", [("xx", "no piece '▁XX'"), ("tags", "bracket")])
def test_tree_constraint_refuses_a_vocabulary_without_trees(
    tmp_path, spm_model, linearization, missing
):
    checkpoint = tmp_path / "model.pt"
    make_checkpoint(
        checkpoint, spm.SentencePieceProcessor(model_file=str(spm_model)).get_piece_size()
    )
    source = tmp_path / "in.txt"
    source.write_text("the cat\n")
    proc = cli("--checkpoint", checkpoint, "--spm", spm_model, "--input", source,
               "--output", tmp_path / "out.txt", "--tree-constraint", linearization)  # fmt: skip
    assert proc.returncode != 0 and missing in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out.txt").exists()


def test_translate_records_its_search_and_score_carries_it(tmp_path, spm_model):
    """The plain `translate --alpha 1.2` then `score` of the README: the score names the search
    that made it without being told, and only for the very translations it was recorded for."""
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    make_checkpoint(tmp_path / "model.pt", sp.get_piece_size())
    (tmp_path / "in.txt").write_text("\n".join(generated_sentences(5, seed=2)) + "\n")
    out = tmp_path / "out.txt"
    result = cli("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--input",
                 tmp_path / "in.txt", "--output", out, "--beam", 2, "--alpha", 1.2,
                 "--max-len-b", 4, "--device", "cpu", "--num-threads", 1)  # fmt: skip
    assert result.returncode == 0, result.stderr

    def score():
        proc = subprocess.run(
            [sys.executable, "-m", "transformer_core", "score", "--hyp", str(out), "--ref",
             str(out), "--bootstrap-resamples", "0", "--out", str(tmp_path / "s.json")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads((tmp_path / "s.json").read_text()).get("decoding")

    decoding = score()
    assert (decoding["beam"], decoding["alpha"]) == (2, 1.2)
    assert decoding["from"] == {"beam": "command line", "alpha": "command line"}
    out.write_text(out.read_text() + "edited\n")  # other translations: the record is not theirs
    assert score() is None


def test_a_beam_beyond_the_vocabulary_or_an_alpha_beyond_10_is_one_line(tmp_path, spm_model):
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    make_checkpoint(tmp_path / "model.pt", sp.get_piece_size())
    (tmp_path / "in.txt").write_text("a b c\n")
    for flag, value, named in (("--beam", 100000, "more than the model's vocabulary"),
                               ("--alpha", 60, "--alpha must be at most 10"),
                               ("--alpha", "1e9", "--alpha must be at most 10")):  # fmt: skip
        result = cli("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--input",
                     tmp_path / "in.txt", "--output", tmp_path / "out.txt", flag, value,
                     "--device", "cpu", "--num-threads", 1)  # fmt: skip
        assert result.returncode == 2 and named in result.stderr, result.stderr[-500:]
        assert result.stderr.count("\n") <= 3 and not (tmp_path / "out.txt").exists()
