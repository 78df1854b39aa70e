"""Hostile and mistaken inputs of the commands: no silent wrong result, and a user's mistake is
one line naming the file or key, exit 2, with no output written (or an existing one left
unchanged)."""

import hashlib
import json
import math
import random
import shutil
import time

import pytest
import torch
from conftest import train_spm
from corpora import TINY

from transformer_core.cli import main
from transformer_core.data.binarized import binarize
from transformer_core.model.checkpoint import load_checkpoint
from transformer_core.tables.markdown import to_markdown
from transformer_core.tables.table4 import table4
from transformer_core.training.average import average_files

# -- shared tiny fixtures: sentencepiece models, binarized data, two short training runs ------------

WORDS = "the cat dog house garden river walks sees finds small green old runs near under".split()
OTHER = (
    "le chat chien maison jardin fleuve marche voit trouve petit vert vieux court pres sous".split()
)


def sentences(words, n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def cli(capsys, *args):
    """Run the command line in this process: (exit status, stderr)."""
    threads = torch.get_num_threads()
    capsys.readouterr()
    try:
        status = main([str(a) for a in args])
    finally:
        torch.set_num_threads(threads)
    return status, capsys.readouterr().err


def one_line_error(err, *names):
    """The message is one line ``transformer-core CMD: error: ...`` naming each of ``names``."""
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    return lines[0]


TRAIN = [
    *TINY,
    "--steps",
    "4",
    "--max-tokens",
    "200",
    "--tokens-per-step",
    "200",
    "--warmup",
    "2",
    "--checkpoint-interval",
    "2",
    "--keep-last",
    "3",
    "--log-interval",
    "2",
    "--num-threads",
    "1",
    "--device",
    "cpu",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two pairs' sentencepiece models of one size (60) plus a smaller one (40), data binarized
    with each of the first two, and a 4-step run on each."""
    root = tmp_path_factory.mktemp("world")
    w = {"root": root}
    for name, words in (("a", WORDS), ("b", OTHER)):
        lines = sentences(words, 300, seed=len(name) + ord(name))
        w[f"spm_{name}"] = train_spm(root / f"{name}.model", lines, 60)
        (root / f"{name}.src").write_text("\n".join(lines[:40]) + "\n")
        (root / f"{name}.tgt").write_text("\n".join(lines[40:80]) + "\n")
        binarize(w[f"spm_{name}"], root / f"{name}.src", root / f"{name}.tgt", root / f"bin_{name}")
        run = root / f"run_{name}"
        threads = torch.get_num_threads()
        try:
            assert (
                main(["train", "--train", str(root / f"bin_{name}"), "--out-dir", str(run), *TRAIN])
                == 0
            )
        finally:
            torch.set_num_threads(threads)
        w[f"run_{name}"] = run
    w["spm_small"] = train_spm(root / "small.model", sentences(WORDS, 300, 5), 40)
    (root / "input.txt").write_text("the cat\nsmall dog\n")
    return w


# -- 2. a checkpoint decoded or scored with another pair's vocabulary --------------------------


def test_checkpoints_record_the_sentencepiece_fingerprint(world):
    payload = load_checkpoint(world["run_a"] / "last.pt")
    assert payload["spm_sha256"] == hashlib.sha256(world["spm_a"].read_bytes()).hexdigest()
    assert payload["run_id"] and payload["spm_model"] == str(world["spm_a"])


@pytest.mark.parametrize("other", ["spm_b", "spm_small"])
def test_translate_refuses_another_pairs_sentencepiece_model(world, tmp_path, capsys, other):
    out = tmp_path / "out.txt"
    status, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        world["run_a"] / "last.pt",
        "--spm",
        world[other],
        "--input",
        world["root"] / "input.txt",
        "--output",
        out,
        "--beam",
        "1",
        "--device",
        "cpu",
    )
    assert status == 2
    one_line_error(err, world["run_a"] / "last.pt", world[other])
    assert not out.exists()


def test_translate_override_still_refuses_a_smaller_vocabulary(world, tmp_path, capsys):
    out = tmp_path / "out.txt"
    status, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        world["run_a"] / "last.pt",
        "--spm",
        world["spm_small"],
        "--input",
        world["root"] / "input.txt",
        "--output",
        out,
        "--beam",
        "1",
        "--device",
        "cpu",
        "--allow-vocab-mismatch",
    )
    assert status == 2 and "fewer than the model's vocab_size=60" in one_line_error(
        err, world["spm_small"]
    )
    assert not out.exists()


def test_translate_with_the_right_model_works(world, tmp_path, capsys):
    out = tmp_path / "out.txt"
    status, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        world["run_a"] / "last.pt",
        "--spm",
        world["spm_a"],
        "--input",
        world["root"] / "input.txt",
        "--output",
        out,
        "--beam",
        "1",
        "--device",
        "cpu",
    )
    assert status == 0, err
    assert len(out.read_text().splitlines()) == 2


def test_ppl_refuses_data_of_another_vocabulary(world, tmp_path, capsys):
    out = tmp_path / "ppl.json"
    out.write_text("old\n")
    status, err = cli(
        capsys,
        "ppl",
        "--checkpoint",
        world["run_a"] / "last.pt",
        "--data",
        world["root"] / "bin_b",
        "--out",
        out,
        "--device",
        "cpu",
    )
    assert status == 2
    one_line_error(err, world["run_a"] / "last.pt", world["root"] / "bin_b", world["spm_b"])
    assert out.read_text() == "old\n"


# -- 3. averaging unrelated runs, or one checkpoint twice ---------------------------------------


def test_average_refuses_runs_on_other_data(world, tmp_path, capsys):
    out = tmp_path / "avg.pt"
    a, b = world["run_a"] / "last.pt", world["run_b"] / "last.pt"
    status, err = cli(capsys, "average", "--checkpoints", a, b, "--out", out)
    assert status == 2 and "different sentencepiece models" in one_line_error(err, a, b)
    assert not out.exists()


def test_average_refuses_another_run_on_the_same_data(world, tmp_path, capsys):
    payload = load_checkpoint(world["run_a"] / "last.pt")
    payload["run_id"] = "f" * 32
    other = tmp_path / "other_run.pt"
    torch.save(payload, other)
    out = tmp_path / "avg.pt"
    status, err = cli(
        capsys, "average", "--checkpoints", world["run_a"] / "last.pt", other, "--out", out
    )
    assert status == 2 and "different training runs" in one_line_error(err, other)
    assert not out.exists()


@pytest.mark.parametrize("second", ["same", "link", "copy"])
def test_average_refuses_a_checkpoint_given_twice(world, tmp_path, capsys, second):
    first = world["run_a"] / "checkpoints" / "step_0000004.pt"
    twin = {"same": first, "link": world["run_a"] / "last.pt", "copy": tmp_path / "copy.pt"}[second]
    if second == "copy":
        shutil.copyfile(first, twin)
    out = tmp_path / "avg.pt"
    status, err = cli(capsys, "average", "--checkpoints", first, twin, "--out", out)
    assert status == 2 and ("twice" in one_line_error(err, twin))
    assert not out.exists()


def test_average_of_one_run_keeps_its_fingerprint(world, tmp_path, capsys):
    out = tmp_path / "avg.pt"
    status, err = cli(capsys, "average", "--run-dir", world["run_a"], "--last", "2", "--out", out)
    assert status == 0, err
    averaged, source = load_checkpoint(out), load_checkpoint(world["run_a"] / "last.pt")
    assert averaged["spm_sha256"] == source["spm_sha256"] and averaged["run_id"] == source["run_id"]


# -- 4. user mistakes: one line naming the file, exit 2, nothing written -------------------------


def test_score_both_files_empty(tmp_path, capsys):
    hyp, ref, out = tmp_path / "hyp.txt", tmp_path / "ref.txt", tmp_path / "score.json"
    hyp.write_text("")
    ref.write_text("")
    status, err = cli(capsys, "score", "--hyp", hyp, "--ref", ref, "--out", out)
    assert status == 2 and "both empty" in one_line_error(err, hyp, ref)
    assert not out.exists()


@pytest.mark.parametrize("case", ["out_is_dir", "hyp_is_dir", "out_parent_is_file"])
def test_score_paths_that_are_not_files(tmp_path, capsys, case):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a b c\n")
    ref.write_text("a b c\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    out = {"out_is_dir": folder, "out_parent_is_file": hyp / "score.json"}.get(
        case, tmp_path / "score.json"
    )
    hyp_arg = folder if case == "hyp_is_dir" else hyp
    status, err = cli(capsys, "score", "--hyp", hyp_arg, "--ref", ref, "--out", out)
    assert status == 2
    one_line_error(err, folder if case != "out_parent_is_file" else hyp)
    assert not (tmp_path / "score.json").exists() and list(folder.iterdir()) == []
    assert hyp.read_text() == "a b c\n"


def test_translate_output_that_is_a_directory_fails_before_decoding(world, tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    started = time.perf_counter()
    status, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        tmp_path / "absent.pt",
        "--spm",
        world["spm_a"],
        "--input",
        world["root"] / "input.txt",
        "--output",
        folder,
        "--device",
        "cpu",
    )
    # The checkpoint does not even exist: the output was checked first, before any work.
    assert status == 2 and "is a directory" in one_line_error(err, folder)
    assert time.perf_counter() - started < 10 and list(folder.iterdir()) == []


def test_resume_from_an_averaged_checkpoint_is_refused(world, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(world["run_a"], run)
    (run / "summary.json").unlink()
    averaged = run / "checkpoints" / "step_0000009.pt"
    average_files(
        [run / "checkpoints" / "step_0000002.pt", run / "checkpoints" / "step_0000004.pt"], averaged
    )
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    status, err = cli(
        capsys, "train", "--train", world["root"] / "bin_a", "--out-dir", run, *TRAIN, "--resume"
    )
    assert status == 2 and "averaged checkpoint" in one_line_error(err, averaged)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before
    assert not (run / "summary.json").exists()


def test_checkpoint_whose_config_does_not_match_its_weights(world, tmp_path, capsys):
    payload = load_checkpoint(world["run_a"] / "last.pt")
    payload["model_config"]["d_ff"] = 128
    bad = tmp_path / "bad.pt"
    torch.save(payload, bad)
    out = tmp_path / "out.txt"
    status, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        bad,
        "--spm",
        world["spm_a"],
        "--input",
        world["root"] / "input.txt",
        "--output",
        out,
        "--device",
        "cpu",
    )
    assert status == 2 and "do not match its stored model_config" in one_line_error(err, bad)
    assert not out.exists()


# -- 5. an F1 that cannot be computed ------------------------------------------------------------


@pytest.mark.parametrize("test_lines", ["", "\n\n"])
def test_evalb_without_valid_sentences_is_an_error(tmp_path, capsys, test_lines):
    gold, test = tmp_path / "gold.tree", tmp_path / "test.tree"
    gold.write_text(
        "" if not test_lines else "(S (NP (DT a)) (VP (VB b)))\n(S (NP (DT c)) (VP (VB d)))\n"
    )
    test.write_text(test_lines)
    report, scores = tmp_path / "evalb.txt", tmp_path / "evalb.json"
    status, err = cli(
        capsys, "evalb", "--gold", gold, "--test", test, "--out", report, "--json", scores
    )
    assert status == 2 and "no valid sentences" in one_line_error(err, test)
    assert not report.exists() and not scores.exists()


def test_table4_shows_an_uncomputable_f1_as_such(tmp_path):
    totals = {"f1": None, "recall": 0.0, "precision": 0.0, "valid_sentences": 0}
    evalb_json = tmp_path / "evalb.json"
    evalb_json.write_text(json.dumps({"all": totals, "cutoff_len": 40, "len<=40": totals}))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"wall_seconds": 1.0, "device": "cpu", "devices": 1, "steps": 4}))
    table = table4(
        [{"setting": "wsj_only", "seed": "1", "evalb": str(evalb_json), "summary": str(summary)}],
        "smoke",
    )
    ours = table[table["source"] == "ours"].iloc[0]
    assert ours["status"] == "no valid sentences" and math.isnan(
        ours["f1"]
    )  # an empty cell, not a number
    assert "no valid sentences" in to_markdown(table)


# -- 6 and 7. resuming after a crash: corrupt newest checkpoint, stale temporaries ---------------


def test_resume_skips_a_corrupt_newest_checkpoint_and_cleans_temporaries(world, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(world["run_a"], run)
    (run / "summary.json").unlink()
    newest = run / "checkpoints" / "step_0000004.pt"
    newest.write_bytes(
        newest.read_bytes()[:100]
    )  # a preempted write on a file system without atomic rename
    stale = run / "checkpoints" / ".step_0000006.pt.k1ll3d.tmp"
    stale.write_bytes(b"")
    status, err = cli(
        capsys, "train", "--train", world["root"] / "bin_a", "--out-dir", run, *TRAIN, "--resume"
    )
    assert status == 0, err
    assert (
        f"skipping checkpoint {newest}" in err
        and "resuming from" in err
        and "step_0000002.pt" in err
    )
    assert (run / "checkpoints" / "step_0000004.pt.corrupt").stat().st_size == 100
    assert not stale.exists() and str(stale) in err
    assert load_checkpoint(run / "last.pt")["step"] == 4
