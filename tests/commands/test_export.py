"""export: a checkpoint as a CTranslate2 model that decodes the same tokens as the project.

The exactness tests decode with both engines and require identical tokens, greedy and beam 4
with no length penalty (alpha 0), where the two engines' penalties cannot rank hypotheses
differently: on sharp random models of both position kinds, beam 4 at a forced length (a
trained model: tests/workflow/test_export_of_the_quickstart_model.py). (A trained model wants to end its sentences; holding EOS off, the
engines rank what follows differently: CTranslate2's ``min_decoding_length`` is not our
``min_len``.) They are skipped, saying why, where the serve extra (ctranslate2) is not installed.
"""

import json
import os
import shutil
import socket
import subprocess

import pytest
import sentencepiece as spm
import torch
from conftest import tiny_config, tiny_model, train_spm
from corpora import generated_sentences
from ctranslate2_engines import (
    assert_same_tokens,
    export_cli,
    needs_ctranslate2,
)

from transformer_core.errors import UserError
from transformer_core.export.ctranslate2 import (
    SUPPRESSED_PIECES,
    check_exportable,
    export_ctranslate2,
)
from transformer_core.export.folder import MARKER
from transformer_core.model.checkpoint import save_checkpoint

FORCED = 12  # output length of the beam-4 comparison on random models


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("spm") / "tiny.model"
    return train_spm(path, generated_sentences(400), 60)


def checkpoint(path, **overrides):
    cfg = tiny_config(vocab_size=60, max_positions=128, **overrides)
    model = tiny_model(cfg, sharp=True)
    save_checkpoint(path, cfg, model.state_dict())
    return model


@needs_ctranslate2
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_export_decodes_the_same_tokens(tmp_path, spm_model, positional):
    model = checkpoint(tmp_path / "model.pt", positional=positional)
    out = tmp_path / "ct2"
    proc = export_cli("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "model.bin").is_file()
    marker = json.loads((out / MARKER).read_text())
    assert marker["decode"]["suppress_sequences"] == [[piece] for piece in SUPPRESSED_PIECES]
    assert_same_tokens(model, out, generated_sentences(40, seed=3), beam4_length=FORCED)


@needs_ctranslate2
def test_export_replaces_an_export_and_refuses_other_folders(tmp_path, spm_model):
    checkpoint(tmp_path / "model.pt")
    out = tmp_path / "ct2"
    for quantization in ("float32", "int8"):  # the second replaces the first
        proc = export_cli(
            "--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", out,
            "--quantization", quantization,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    assert '"quantization": "int8"' in (out / MARKER).read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ct2.")]  # no leftovers

    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "todo.txt").write_text("keep me\n")
    proc = export_cli("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", precious)
    assert proc.returncode == 2
    assert "holds something other than an export" in proc.stderr and "Traceback" not in proc.stderr
    assert (precious / "todo.txt").read_text() == "keep me\n"


@needs_ctranslate2
def test_export_leaves_the_model_as_it_was(tmp_path, spm_model):
    """CTranslate2's int8 optimization rewrites its arrays in place: they must be copies."""
    model = checkpoint(tmp_path / "model.pt")
    before = {name: value.clone() for name, value in model.state_dict().items()}
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    export_ctranslate2(model, sp, spm_model, tmp_path / "ct2", quantization="int8")
    changed = [
        name for name, value in model.state_dict().items() if not torch.equal(before[name], value)
    ]
    assert not changed


def test_export_without_the_extra_names_it(tmp_path, spm_model):
    checkpoint(tmp_path / "model.pt")
    hide = "import sys\nsys.modules['ctranslate2'] = None  # as if not installed"
    proc = export_cli(
        "--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", tmp_path / "ct2",
        env_code=hide,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and '".[serve]"' in proc.stderr, proc.stderr
    assert not (tmp_path / "ct2").exists()


def test_shapes_ctranslate2_cannot_express_are_refused():
    check_exportable(tiny_model(tiny_config()))  # h * d_k == d_model: fine
    with pytest.raises(UserError, match="d_k=4, d_v=8"):
        check_exportable(tiny_model(tiny_config(d_k=4)))  # a Table 3 row (B) shape


@needs_ctranslate2
def test_a_reexport_replaces_only_what_an_export_wrote(tmp_path, spm_model):
    checkpoint(tmp_path / "model.pt")
    out = tmp_path / "ct2"
    args = ("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", out)
    assert export_cli(*args).returncode == 0
    (out / "NOTES.txt").write_text("keep me\n")
    proc = export_cli(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "holds NOTES.txt, which no export wrote" in proc.stderr
    assert (out / "NOTES.txt").read_text() == "keep me\n" and (out / "model.bin").is_file()

    (out / "NOTES.txt").unlink()
    inside = out / "model.pt"
    shutil.copy(tmp_path / "model.pt", inside)  # exporting a checkpoint kept in its own export
    proc = export_cli("--checkpoint", inside, "--spm", spm_model, "--out", out)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"--out {out} holds --checkpoint {inside}" in proc.stderr
    assert inside.is_file() and (out / "model.bin").is_file()


@needs_ctranslate2
@pytest.mark.parametrize("target", ["folder", "dangling"])
def test_an_export_into_a_symbolic_link_is_refused(tmp_path, spm_model, target):
    checkpoint(tmp_path / "model.pt")
    link = tmp_path / "link"
    (tmp_path / "elsewhere").mkdir()
    link.symlink_to(tmp_path / ("elsewhere" if target == "folder" else "gone"))
    proc = export_cli("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", link)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"--out {link} is a symbolic link" in proc.stderr


@needs_ctranslate2
def test_what_killed_exports_left_is_cleaned_and_a_set_aside_export_put_back(tmp_path, spm_model):
    checkpoint(tmp_path / "model.pt")
    out = tmp_path / "ct2"
    args = ("--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", out)
    assert export_cli(*args).returncode == 0
    ended = subprocess.Popen(["true"])  # noqa: S607
    ended.wait()
    prefix = f".ct2.{socket.gethostname()}-{ended.pid}."
    half_built = tmp_path / f"{prefix}a1.tmp"  # killed while writing its files
    half_built.mkdir()
    (half_built / "model.bin").write_bytes(b"half")
    out.rename(tmp_path / f"{prefix}b2.old")  # killed between its two renames
    live = tmp_path / f".ct2.{socket.gethostname()}-{os.getpid()}.c3.tmp"  # a running export's
    live.mkdir()

    proc = export_cli(*args, "--quantization", "int8")
    assert proc.returncode == 0, proc.stderr
    assert f"put back {out}" in proc.stderr
    assert '"quantization": "int8"' in (out / MARKER).read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".ct2.")) == [live.name]
