"""export: a checkpoint as a CTranslate2 model that decodes the same tokens as the project.

The exactness tests decode with both engines and require identical tokens, greedy and beam 4
with no length penalty (alpha 0), where the two engines' penalties cannot rank hypotheses
differently: on sharp random models of both position kinds, beam 4 at a forced length; on a
trained smoke model of the session's quickstart, beam 4 at its natural lengths, and every
token's log-probability. (A trained model wants to end its sentences; holding EOS off, the
engines rank what follows differently: CTranslate2's ``min_decoding_length`` is not our
``min_len``.) They are skipped, saying why, where the serve extra (ctranslate2) is not installed.
"""

import importlib.util
import json
import subprocess
import sys

import pytest
import sentencepiece as spm
import torch
from conftest import tiny_config, tiny_model, train_spm
from test_translate import generated_sentences

from transformer_core.checkpoint import load_model, save_checkpoint
from transformer_core.errors import UserError
from transformer_core.export import (
    MARKER,
    SPM_NAME,
    SUPPRESSED_PIECES,
    check_exportable,
    export_ctranslate2,
)
from transformer_core.search import beam_search_nbest

needs_ctranslate2 = pytest.mark.skipif(
    importlib.util.find_spec("ctranslate2") is None,
    reason='ctranslate2 not installed (the serve extra: pip install -e ".[serve]")',
)
FORCED = 12  # output length of the beam-4 comparison on random models


def export_cli(*args, env_code=""):
    """``transformer-core export ARGS`` in a fresh interpreter (``env_code`` runs first)."""
    code = f"{env_code}\nimport sys\nfrom transformer_core.cli import main\nsys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, "export", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def ours(model, ids, beam, forced=0):
    """Our best output ids for ``ids``, at most 40 tokens, or exactly ``forced`` (0: to EOS)."""
    hyps = beam_search_nbest(
        model,
        torch.tensor([ids + [model.cfg.eos_id]]),
        beam_size=beam,
        alpha=0.0,
        max_len_a=0.0,
        max_len_b=forced or 40,
        min_len=forced,
    )
    return hyps[0][0].tokens


def theirs(translator, sp, sources, beam, forced=0):
    """CTranslate2's best output ids for each source, searched as ``ours`` searches."""
    length = {"min_decoding_length": forced, "max_decoding_length": forced} if forced else {}
    results = translator.translate_batch(
        [[sp.id_to_piece(i) for i in ids] for ids in sources],
        beam_size=beam,
        length_penalty=0.0,
        suppress_sequences=[[piece] for piece in SUPPRESSED_PIECES],
        **({"max_decoding_length": 40} | length),
    )
    return [[sp.piece_to_id(p) for p in r.hypotheses[0]] for r in results]


def translator_of(folder):
    import ctranslate2

    sp = spm.SentencePieceProcessor(model_file=str(folder / SPM_NAME))
    return ctranslate2.Translator(str(folder), device="cpu", intra_threads=1), sp


def assert_same_tokens(model, folder, lines, beam4_length=0):
    """Both engines' outputs for ``lines``, greedy and beam 4 (``beam4_length`` tokens long, 0:
    to EOS), are the same tokens."""
    translator, sp = translator_of(folder)
    sources = [sp.encode(line) for line in lines]
    for beam, forced in ((1, 0), (4, beam4_length)):
        expected = [ours(model, ids, beam, forced) for ids in sources]
        got = theirs(translator, sp, sources, beam, forced)
        same = sum(a == b for a, b in zip(expected, got, strict=True))
        assert same == len(sources), f"beam {beam}: {same} of {len(sources)} identical"
        assert len({tuple(t) for t in got}) >= 3  # outputs that vary: not a vacuous match


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
def test_export_of_a_trained_smoke_model(smoke_quickstart, tmp_path):
    """The averaged EN-DE base model of the quickstart (trained), on its test sentences."""
    assert smoke_quickstart.proc.returncode == 0, smoke_quickstart.proc.stderr[-5000:]
    work = smoke_quickstart.workdir
    ckpt, spm_path = work / "runs/en_de/base/averaged.pt", work / "data/en_de/spm.model"
    out = tmp_path / "ct2"
    proc = export_cli("--checkpoint", ckpt, "--spm", spm_path, "--out", out)
    assert proc.returncode == 0, proc.stderr
    lines = (work / "data/en_de/raw/test.en").read_text().splitlines()[:40]
    model = load_model(ckpt)
    assert_same_tokens(model, out, lines)

    translator, sp = translator_of(out)  # every token's log-probability, EOS included
    sources = [sp.encode(line) for line in lines]
    targets = [ours(model, ids, 1) for ids in sources]
    scored = translator.score_batch(
        [[sp.id_to_piece(i) for i in ids] for ids in sources],
        [[sp.id_to_piece(i) for i in ids] for ids in targets],
    )
    for ids, target, result in zip(sources, targets, scored, strict=True):
        with torch.no_grad():
            log_probs = model(torch.tensor([ids + [3]]), torch.tensor([[2] + target]))
        log_probs = log_probs.log_softmax(-1)[0]
        expected = log_probs[torch.arange(len(target) + 1), torch.tensor(target + [3])]
        torch.testing.assert_close(torch.tensor(result.log_probs), expected, atol=1e-4, rtol=0)


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
