"""The binarized format: the streaming writer and ParallelDataset read back what was written."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import sentencepiece as spm

from transformer_core.data import bpe, smoke
from transformer_core.data.binarized import BinarizedWriter, binarize, split_files
from transformer_core.data.dataset import ParallelDataset, training_sets
from transformer_core.errors import UserError


def random_pairs(n, vocab_size, seed=0, max_len=12):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        s = rng.integers(4, vocab_size, size=rng.integers(0, max_len)).tolist()
        t = rng.integers(4, vocab_size, size=rng.integers(0, max_len)).tolist()
        pairs.append((s, t))
    return pairs


def write(prefix, pairs, vocab_size, chunk_sentences=3, **metadata):
    with BinarizedWriter(
        prefix, vocab_size, metadata=metadata, chunk_sentences=chunk_sentences
    ) as w:
        for s, t in pairs:
            w.add(s, t)


@pytest.mark.parametrize("vocab_size, dtype", [(8000, "<u2"), (65536, "<u2"), (100_000, "<i4")])
def test_roundtrip_across_chunks(tmp_path, vocab_size, dtype):
    pairs = random_pairs(23, vocab_size)  # 23 = 7 full chunks of 3 + a partial one
    pairs[4] = ([], [5])  # empty source side survives
    pairs.append(([vocab_size - 1], [vocab_size - 1, 4]))
    prefix = tmp_path / "bin" / "train"
    write(prefix, pairs, vocab_size, spm_sha256="abc")

    ds = ParallelDataset(prefix)
    assert len(ds) == len(pairs)
    assert ds.vocab_size == vocab_size
    assert ds.header["dtype"] == dtype
    assert ds.header["spm_sha256"] == "abc"
    assert ds.header["src_tokens"] == sum(len(s) for s, _ in pairs)
    for i, (s, t) in enumerate(pairs):
        assert ds.src(i).tolist() == s
        assert ds.tgt(i).tolist() == t
        assert ds.src(i).dtype == np.int64
    assert ds.src_lens.tolist() == [len(s) for s, _ in pairs]
    assert ds.tgt_lens.tolist() == [len(t) for _, t in pairs]
    assert ds.src(-1).tolist() == pairs[-1][0]
    with pytest.raises(IndexError):
        ds.src(len(pairs))
    names = sorted(p.name for p in prefix.parent.iterdir())
    assert names == sorted(p.name for p in split_files(prefix).values())


def test_pickles_as_its_prefix(tmp_path):
    pairs = random_pairs(2000, 8000, max_len=30)
    write(tmp_path / "d", pairs, 8000, chunk_sentences=500)
    ds = ParallelDataset(tmp_path / "d")
    blob = pickle.dumps(ds)
    assert len(blob) < 1000  # not the arrays
    again = pickle.loads(blob)
    assert again.src(1999).tolist() == pairs[1999][0] and (again.tgt_lens == ds.tgt_lens).all()


def test_empty_split(tmp_path):
    write(tmp_path / "empty", [], 100)
    ds = ParallelDataset(tmp_path / "empty")
    assert len(ds) == 0 and ds.src_lens.size == 0


def test_failure_leaves_previous_split_intact(tmp_path):
    prefix = tmp_path / "train"
    good = random_pairs(5, 50)
    write(prefix, good, 50)
    with pytest.raises(RuntimeError), BinarizedWriter(prefix, 50, chunk_sentences=2) as w:
        for s, t in random_pairs(7, 50, seed=1):
            w.add(s, t)
        raise RuntimeError("killed")
    ds = ParallelDataset(prefix)
    assert [ds.src(i).tolist() for i in range(len(ds))] == [s for s, _ in good]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_out_of_range_id_rejected_without_output(tmp_path):
    with pytest.raises(ValueError, match="out of range"), BinarizedWriter(tmp_path / "x", 10) as w:
        w.add([1, 2], [10])
    assert list(tmp_path.iterdir()) == []


def test_missing_header_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="binarize"):
        ParallelDataset(tmp_path / "nothing")


def test_truncated_array_is_a_user_error(tmp_path):
    prefix = tmp_path / "train"
    write(prefix, random_pairs(10, 50), 50)
    path = split_files(prefix)["tgt.bin"]
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(UserError, match="tgt.bin"):
        ParallelDataset(prefix)


def test_foreign_header_is_a_user_error(tmp_path):
    prefix = tmp_path / "train"
    write(prefix, random_pairs(3, 50), 50)
    header = split_files(prefix)["json"]
    header.write_text(json.dumps({"format": "other"}))
    with pytest.raises(UserError, match="format"):
        ParallelDataset(prefix)


def test_cli_binarize_matches_sentencepiece(tmp_path):
    pairs = smoke.generate("fr", 2, {"train": 600})["train"]
    src, tgt = tmp_path / "train.en", tmp_path / "train.fr"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    bpe.train([src, tgt], 300, tmp_path / "bpe")
    prefix = tmp_path / "bin" / "train"
    result = subprocess.run(
        [sys.executable, "-m", "transformer_core", "binarize", "--spm", str(tmp_path / "bpe.model"),
         "--src", str(src), "--tgt", str(tgt), "--out-prefix", str(prefix)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "binarize: 600 pairs" in result.stderr
    ds = ParallelDataset(prefix)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "bpe.model"))
    assert len(ds) == 600 and ds.vocab_size == 300
    assert ds.header["spm_sha256"] == bpe.sha256_of(tmp_path / "bpe.model")
    assert ds.header["dtype"] == "<u2"
    for i in (0, 299, 599):
        assert ds.src(i).tolist() == sp.encode(pairs[i][0])
        assert ds.tgt(i).tolist() == sp.encode(pairs[i][1])
    assert ds.tgt_lens.sum() == ds.header["tgt_tokens"]


def test_binarize_line_count_mismatch(tmp_path):
    pairs = smoke.generate("de", 2, {"train": 300})["train"]
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs[:-1]), encoding="utf-8")
    bpe.train([src, tgt], 300, tmp_path / "bpe")
    with pytest.raises(UserError, match=rf"{src} has 300 lines, {tgt} has 299"):
        binarize(tmp_path / "bpe.model", src, tgt, tmp_path / "out")
    assert not list(tmp_path.glob("out*"))


def test_training_and_dev_sets_must_share_vocabulary_and_sentencepiece_model(tmp_path):
    pairs = random_pairs(4, 40)  # ids below both vocabularies
    write(tmp_path / "train", pairs, 50, spm_sha256="a" * 64, spm_model="one.model")
    write(tmp_path / "dev", pairs, 50, spm_sha256="a" * 64, spm_model="one.model")
    train_set, dev_set = training_sets(tmp_path / "train", tmp_path / "dev")
    assert len(train_set) == len(dev_set) == 4
    assert training_sets(tmp_path / "train")[1] is None
    write(tmp_path / "small", pairs, 40)
    with pytest.raises(
        UserError, match=r"small has vocabulary 40, the training set .*train has 50"
    ):
        training_sets(tmp_path / "train", tmp_path / "small")
    write(tmp_path / "other", pairs, 50, spm_sha256="b" * 64, spm_model="two.model")
    with pytest.raises(
        UserError, match=r"encoded with sentencepiece model two.model, .* one.model"
    ):
        training_sets(tmp_path / "train", tmp_path / "other")
    write(tmp_path / "unrecorded", pairs, 50)  # an older header without a sha256 passes
    assert training_sets(tmp_path / "train", tmp_path / "unrecorded")[1] is not None
