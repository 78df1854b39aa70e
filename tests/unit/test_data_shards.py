"""Shards of the training corpus: the result does not depend on their number.

A generated corpus (normalization work, every filter, invalid UTF-8, a last line
without a line break) goes through the library functions the workflow's shard
rules run (shards split, prepare per shard, report, spm train on all shards,
binarize per shard, merge) for N = 1, 2 and 8, and through the unsharded path.
"""

import io
import json
import random
import re
import shutil

import numpy as np
import pytest

from transformer_core.cli import main
from transformer_core.data import bpe, shards
from transformer_core.data.binarized import binarize, concatenate, read_header, split_files
from transformer_core.data.dataset import ParallelDataset
from transformer_core.data.prepare import prepare_corpus, prepare_shard
from transformer_core.data.progress import Progress, duration
from transformer_core.errors import UserError
from transformer_core.settings import PrepareSettings, SentencePieceSettings

SAMPLE_2000 = SentencePieceSettings(sample_size=2000)

WORDS = "the a house small river green walks sees finds old under near quickly".split()
MOTS = "la le maison petit fleuve vert marche voit trouve vieux sous près vite".split()
ARRAYS = [key for key in split_files("x") if key != "json"]
PROVENANCE = ("src_text", "tgt_text", "parts", "spm_model")


def generated_corpus(folder, pairs=1500, seed=3):
    """Raw bytes of a parallel corpus with what prepare has to handle."""
    rng = random.Random(seed)
    src, tgt = [], []
    for i in range(pairs):
        n = rng.randint(1, 30)
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        t = " ".join(rng.choice(MOTS) for _ in range(max(1, n + rng.randint(-3, 3))))
        kind = i % 17
        if kind == 1:
            s = ""  # empty
        elif kind == 2:
            t = " ".join(["mot"] * 260)  # too long
        elif kind == 3:
            t = "vite"  # ratio
        elif kind == 4:
            s = s.replace(" ", "  \u00a0", 1) + " \u201cquoted\u201d \u2026"  # normalization
        elif kind == 5:
            t = t + "\u200b\x07 fin\r"  # non-printing characters, a CR
        src.append(s.encode())
        tgt.append(t.encode())
    src[7] = b"caf\xe9 " + src[7]  # Latin-1, not UTF-8: replaced
    (folder / "train.en").write_bytes(b"\n".join(src) + b"\n")
    (folder / "train.fr").write_bytes(b"\n".join(tgt))  # no final line break
    return folder / "train.en", folder / "train.fr"


def sharded_run(raw, count, out, spm_prefix):
    """What the workflow's rules do for ``count`` shards; the merged report, the spm model,
    the binarized prefix. The model is trained at ``spm_prefix`` for every N, as at
    data/<pair>/spm.model: the model file records its own prefix."""
    out.mkdir()
    index = out / "index.json"
    shards.write_plan(*raw, count, index)
    settings = PrepareSettings(src_lang="en", tgt_lang="fr")
    reports, texts = [], {"src": [], "tgt": []}
    for i in range(count):
        name = shards.name(i, count)
        paths = {side: out / f"{name}.{side}" for side in ("src", "tgt")}
        shard = shards.load_shard(index, i, count)
        reports.append(prepare_shard(shard, paths["src"], paths["tgt"], settings))
        for side in ("src", "tgt"):
            texts[side].append(paths[side])
    report = shards.merge_reports(reports, [str(i) for i in range(count)])
    model = bpe.train(texts["src"] + texts["tgt"], 200, spm_prefix, SAMPLE_2000, threads=1)
    for suffix in (".model", ".vocab"):
        shutil.copy(f"{spm_prefix}{suffix}", out / f"spm{suffix}")
    parts = []
    for i, (src, tgt) in enumerate(zip(texts["src"], texts["tgt"], strict=True)):
        parts.append(out / "bin" / shards.name(i, count))
        binarize(out / "spm.model", src, tgt, parts[-1])
    concatenate(parts, out / "train")
    return report, model, out / "train"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    raw = generated_corpus(root)
    spm_prefix = root / "spm" / "spm"
    results = {
        count: sharded_run(raw, count, root / f"n{count}", spm_prefix) for count in (1, 2, 8)
    }
    return raw, results, spm_prefix


def comparable(header):
    return {k: v for k, v in header.items() if k not in PROVENANCE}


def test_the_number_of_shards_changes_nothing(runs):
    _, results, _ = runs
    report_1, model_1, prefix_1 = results[1]
    header_1 = read_header(prefix_1)
    assert header_1["num_sentences"] == report_1["pairs_out"] > 1000
    for count in (2, 8):
        report, model, prefix = results[count]
        assert model["model_sha256"] == model_1["model_sha256"], count  # the same sample
        for key in ARRAYS:
            assert (
                split_files(prefix)[key].read_bytes() == split_files(prefix_1)[key].read_bytes()
            ), (count, key)
        assert comparable(read_header(prefix)) == comparable(header_1)
        assert {k: v for k, v in report.items() if k not in ("outputs", "shards")} == {
            k: v for k, v in report_1.items() if k not in ("outputs", "shards")
        }
        assert len(report["shards"]) == count
        assert sum(s["pairs_out"] for s in report["shards"]) == report["pairs_out"]


def test_shards_equal_the_unsharded_path(runs, tmp_path):
    raw, results, spm_prefix = runs
    report_1, model_1, prefix_1 = results[1]
    settings = PrepareSettings(src_lang="en", tgt_lang="fr")
    whole = prepare_corpus(*raw, tmp_path / "p.src", tmp_path / "p.tgt", settings)
    assert whole["pairs_in"] == 1500 and whole["pairs_out"] < 1500
    assert all(whole["removed"][reason] > 0 for reason in whole["removed"])  # every filter
    for key in ("pairs_in", "pairs_out", "removed", "removed_total",
                "lines_changed_by_normalization", "nonprinting_chars_removed"):  # fmt: skip
        assert report_1[key] == whole[key], key
    assert list(report_1)[: len(whole)] == list(whole)  # the report's format, keys in order
    assert (tmp_path / "p.src").read_bytes() == (prefix_1.parent / "0000-of-0001.src").read_bytes()
    model = bpe.train([tmp_path / "p.src", tmp_path / "p.tgt"], 200, spm_prefix, SAMPLE_2000,
                      threads=1)  # fmt: skip
    assert model["model_sha256"] == model_1["model_sha256"]
    binarize(f"{spm_prefix}.model", tmp_path / "p.src", tmp_path / "p.tgt", tmp_path / "train")
    for key in ARRAYS:
        assert split_files(tmp_path / "train")[key].read_bytes() == (
            split_files(prefix_1)[key].read_bytes()
        ), key
    dataset = ParallelDataset(results[8][2])
    assert len(dataset) == whole["pairs_out"]


def test_more_shards_than_pairs(tmp_path):
    (tmp_path / "a").write_text("one\ntwo\nthree\n")
    (tmp_path / "b").write_text("eins\nzwei\ndrei\n")
    index = shards.plan(tmp_path / "a", tmp_path / "b", 5)
    assert [s["lines"] for s in index["shards"]] == [0, 1, 0, 1, 1]
    shards.write_plan(tmp_path / "a", tmp_path / "b", 5, tmp_path / "i.json")
    lines = [list(shards.load_shard(tmp_path / "i.json", i).pairs()) for i in range(5)]
    assert lines == [[], [("one", "eins")], [], [("two", "zwei")], [("three", "drei")]]


def test_plan_checks_its_inputs(tmp_path):
    (tmp_path / "a").write_text("one\ntwo\n")
    (tmp_path / "b").write_text("eins\n")
    with pytest.raises(UserError, match="a has 2 lines, .*b has 1"):
        shards.plan(tmp_path / "a", tmp_path / "b", 2)
    with pytest.raises(UserError, match="at least 1"):
        shards.plan(tmp_path / "a", tmp_path / "a", 0)
    (tmp_path / "c.gz").write_bytes(b"")
    with pytest.raises(UserError, match="gzip"):
        shards.plan(tmp_path / "c.gz", tmp_path / "c.gz", 1)


def test_stale_or_foreign_index_is_refused(tmp_path):
    (tmp_path / "a").write_text("one\ntwo\n")
    (tmp_path / "b").write_text("eins\nzwei\n")
    shards.write_plan(tmp_path / "a", tmp_path / "b", 2, tmp_path / "i.json")
    with pytest.raises(UserError, match="indexes 2 shards, not 3"):
        shards.load_shard(tmp_path / "i.json", 0, 3)
    with pytest.raises(UserError, match="no shard 2"):
        shards.load_shard(tmp_path / "i.json", 2)
    (tmp_path / "b").write_text("eins\nzwei und drei\n")
    with pytest.raises(UserError, match="b: changed since"):
        shards.load_shard(tmp_path / "i.json", 0)
    (tmp_path / "i.json").write_text("{}")
    with pytest.raises(
        UserError, match="format None version None, expected .transformer_core.shards."
    ):
        shards.load_shard(tmp_path / "i.json", 0)


def test_reports_must_be_all_shards_in_order(runs):
    _, results, _ = runs
    report = results[2][0]
    parts = [
        {**report, "shard": {"index": i, "count": 2}, "outputs": {"src": "s", "tgt": "t"}}
        for i in range(2)
    ]
    with pytest.raises(UserError, match="not shards 0..1 of 2 in order"):
        shards.merge_reports(parts[::-1], ["r1", "r0"])
    other = {**parts[1], "settings": {**parts[1]["settings"], "max_len": 80}}
    with pytest.raises(UserError, match="r1: settings differ from those of r0"):
        shards.merge_reports([parts[0], other], ["r0", "r1"])


def test_concatenate_refuses_mismatched_splits(runs, tmp_path):
    _, results, _ = runs
    prefix = results[2][2].parent / "bin" / shards.name(0, 2)
    header = json.loads(split_files(prefix)["json"].read_text())
    other = tmp_path / "other"
    for key, path in split_files(prefix).items():
        split_files(other)[key].write_bytes(path.read_bytes())
    split_files(other)["json"].write_text(json.dumps({**header, "spm_sha256": "f00"}))
    with pytest.raises(UserError, match="spm_sha256 'f00' differs"):
        concatenate([prefix, other], tmp_path / "out")
    split_files(other)["json"].write_text(json.dumps(header))
    split_files(other)["tgt.len"].write_bytes(b"")
    with pytest.raises(UserError, match="other.tgt.len: missing or not the size"):
        concatenate([prefix, other], tmp_path / "out")
    assert not split_files(tmp_path / "out")["json"].exists()


def test_cli_runs_the_shard_steps(runs, tmp_path):
    raw, results, spm_prefix = runs
    index = tmp_path / "index.json"
    assert main(["shards", "split", "--src", str(raw[0]), "--tgt", str(raw[1]),
                 "--shards", "2", "--out", str(index)]) == 0  # fmt: skip
    for i in range(2):
        name = shards.name(i, 2)
        assert main(["prepare", "--src-in", str(raw[0]), "--tgt-in", str(raw[1]),
                     "--shard-index", str(index), "--shard", str(i), "--shards", "2",
                     "--src-out", str(tmp_path / f"{name}.src"),
                     "--tgt-out", str(tmp_path / f"{name}.tgt"),
                     "--report", str(tmp_path / f"{name}.report.json"),
                     "--src-lang", "en", "--tgt-lang", "fr"]) == 0  # fmt: skip
        assert main(["binarize", "--spm", str(results[2][2].parent / "spm.model"),
                     "--src", str(tmp_path / f"{name}.src"), "--tgt", str(tmp_path / f"{name}.tgt"),
                     "--out-prefix", str(tmp_path / "bin" / name)]) == 0  # fmt: skip
    reports = [str(tmp_path / f"{shards.name(i, 2)}.report.json") for i in range(2)]
    assert main(["shards", "report", "--reports", *reports, "--out", str(tmp_path / "r.json")]) == 0
    parts = [str(tmp_path / "bin" / shards.name(i, 2)) for i in range(2)]
    assert main(["shards", "merge", "--parts", *parts, "--out-prefix", str(tmp_path / "t")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["pairs_out"] == results[2][0]["pairs_out"]
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"pairs_out": 3}))
    assert main(["shards", "merge", "--parts", *parts, "--out-prefix", str(tmp_path / "u"),
                 "--prepare-report", str(stale)]) == 2  # fmt: skip
    assert not (tmp_path / "u.json").exists()
    for key in ARRAYS:
        assert split_files(tmp_path / "t")[key].read_bytes() == (
            split_files(results[2][2])[key].read_bytes()
        )
    assert (
        main(
            [
                "prepare",
                "--src-in",
                str(raw[0]),
                "--tgt-in",
                str(raw[1]),
                "--shard-index",
                str(index),
                "--src-out",
                "x",
                "--tgt-out",
                "y",
                "--report",
                "z",
            ]
        )
        == 2
    )  # fmt: skip: --shard-index needs --shard


def test_default_count():
    assert shards.default_count(5000) == 1
    assert shards.default_count(4_500_000) == 15
    assert shards.default_count(36_000_000) == 120
    assert shards.default_count(100_000_000) == shards.MAX_DEFAULT_SHARDS
    assert shards.default_count(None) == shards.UNKNOWN_SIZE_SHARDS
    assert shards.name(3, 8) == "0003-of-0008" and shards.parse_name("0003-of-0008") == (3, 8)


def test_shard_names_match_the_shard_wildcard_and_near_misses_do_not():
    for count in (1, 2, 8, 128, 9999):  # up to the schema's maximum of pairs.<pair>.shards
        for index in {0, count // 2, count - 1}:
            assert re.fullmatch(shards.NAME_PATTERN, shards.name(index, count))
    for near_miss in (
        "3-of-8",
        "0003-of-00008",
        "0003_of_0008",
        "0003-of-0008.src",
        "00a3-of-0008",
    ):
        assert not re.fullmatch(shards.NAME_PATTERN, near_miss), near_miss


def test_progress_lines():
    stream = io.StringIO()
    progress = Progress("prepare shard 0 of 2", 1000, interval=0.0, stream=stream)
    progress.update(250)
    progress.done()
    first, last = stream.getvalue().splitlines()
    assert first.startswith("prepare shard 0 of 2: 250 / 1,000 pairs (25.0%), ")
    assert "pairs/s, ETA " in first
    assert last.startswith("prepare shard 0 of 2: 250 pairs in ") and last.endswith("pairs/s")
    assert duration(3723) == "1h02m03s" and duration(65) == "1m05s" and duration(4) == "4s"


def test_merge_streams_offsets_in_chunks(runs, tmp_path, monkeypatch):
    """Offsets shifted a few at a time give the same bytes (the 1M-offset chunks at scale)."""
    _, results, _ = runs
    monkeypatch.setattr("transformer_core.data.binarized.OFFSET_CHUNK", 7)
    folder = results[8][2].parent / "bin"
    parts = [folder / shards.name(i, 8) for i in range(8)]
    concatenate(parts, tmp_path / "t")
    idx = np.fromfile(split_files(tmp_path / "t")["src.idx"], dtype="<i8")
    assert idx[0] == 0 and np.all(np.diff(idx) >= 0)
    for key in ARRAYS:
        assert split_files(tmp_path / "t")[key].read_bytes() == (
            split_files(results[8][2])[key].read_bytes()
        )
