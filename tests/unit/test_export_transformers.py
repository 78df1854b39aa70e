"""export --format transformers: a MarianMT folder that transformers loads with from_pretrained and
that computes what the project's model computes (the trained model of the quickstart:
tests/workflow/test_export_of_the_quickstart_model.py), its tokenizer the project's pieces, its
model card, and the models MarianMT cannot express refused in one line. Skipped, saying why,
where transformers (the hf extra) is not installed."""

import json
import os

import pytest
import sentencepiece as spm
import torch
from conftest import tiny_config, tiny_model, train_spm
from corpora import generated_sentences

from transformer_core.cli import main
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.export.card import card_facts, model_card
from transformer_core.export.transformers import CARD, marian_order
from transformer_core.model.checkpoint import save_checkpoint
from transformer_core.model.transformer import sinusoidal_encoding
from transformer_core.settings import TrainSettings

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

pytest.importorskip(
    "transformers", reason='transformers not installed (the hf extra: pip install -e ".[hf]")'
)


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    return train_spm(tmp_path_factory.mktemp("spm") / "tiny.model", generated_sentences(400), 60)


def checkpoint(path, **overrides):
    cfg = tiny_config(vocab_size=60, max_positions=128, **overrides)
    model = tiny_model(cfg, sharp=True)
    save_checkpoint(path, cfg, model.state_dict(), experiment="base")
    return model


def export(tmp_path, spm_model, *extra):
    return main(["export", "--checkpoint", str(tmp_path / "model.pt"), "--spm", str(spm_model),
                 "--format", "transformers", "--out", str(tmp_path / "hf"), *extra])  # fmt: skip


def test_marian_order_turns_our_sinusoids_into_marians():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    theirs = MarianSinusoidalPositionalEmbedding(64, 32).create_weight()
    ours = sinusoidal_encoding(64, 32)[:, marian_order(32)]
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_the_export_computes_what_the_model_computes(tmp_path, spm_model):
    from transformers import MarianMTModel, MarianTokenizer

    model = checkpoint(tmp_path / "model.pt")
    assert export(tmp_path, spm_model) == 0
    folder = tmp_path / "hf"
    tokenizer = MarianTokenizer.from_pretrained(str(folder))
    hf = MarianMTModel.from_pretrained(str(folder)).eval()
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    lines = generated_sentences(30, seed=9)
    for line in lines:  # the project's pieces, then EOS, as translate encodes them
        assert tokenizer(line).input_ids == sp.encode(line) + [sp.eos_id()]

    batch = tokenizer(lines, return_tensors="pt", padding=True)
    target = torch.randint(4, 60, (len(lines), 9), generator=torch.Generator().manual_seed(1))
    target[:, 0] = sp.bos_id()
    with torch.no_grad():
        theirs = hf(**batch, decoder_input_ids=target).logits
        for i, line in enumerate(lines):  # ours one by one: no padding in the way
            ours = model(torch.tensor([sp.encode(line) + [sp.eos_id()]]), target[i : i + 1])
            torch.testing.assert_close(theirs[i : i + 1], ours, atol=1e-4, rtol=0)

    greedy = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=41)
    for line, generated in zip(lines, greedy, strict=True):
        ids = torch.tensor([sp.encode(line) + [sp.eos_id()]])
        [[best]] = beam_search_nbest(model, ids, beam=1, alpha=0.0, max_len_a=0.0, max_len_b=40)
        tokens = [t for t in generated.tolist()[1:] if t != sp.pad_id()]
        assert tokens[: tokens.index(sp.eos_id())] == best.tokens
    assert hf.generation_config.num_beams == 4
    assert hf.generation_config.suppress_tokens == [sp.pad_id(), sp.bos_id()]


def test_the_model_card_states_the_score_and_the_command(tmp_path, spm_model):
    checkpoint(tmp_path / "model.pt")
    score = {"sacrebleu": 27.31, "bleu_paper_style": 28.02, "ref": "newstest2014.de",
             "sacrebleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"}  # fmt: skip
    (tmp_path / "score.json").write_text(json.dumps(score))
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 0
    card = (tmp_path / "hf" / CARD).read_text()
    assert "sacreBLEU 27.31" in card and score["sacrebleu_signature"] in card
    assert "paper-style BLEU 28.02" in card and "--format transformers" in card
    assert json.loads((tmp_path / "hf" / "export.json").read_text())["format"] == "transformers"
    # A score that does not record its search: the card claims none (the folder's generation
    # configuration keeps the paper's beam 4 and alpha 0.6 as generate's defaults).
    assert "(the score file records no beam or length penalty" in card and "alpha 0.6" not in card
    assert 'return_tensors="pt", truncation=True)' in card  # cut as the docs say, not IndexError
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "hf").iterdir()}
    assert len(set(modes.values())) == 1, modes  # the weights as readable as the rest


def test_the_card_states_the_recipe_of_the_run_beside_the_checkpoint(tmp_path, spm_model):
    """A checkpoint without its recipe (an average's): the card reads it from the run's
    summary.json beside it; the recipe keys the card states are ``TrainSettings`` fields."""
    model = checkpoint(tmp_path / "model.pt")
    recipe = TrainSettings(steps=1200, warmup=40, seed=7).to_dict()
    (tmp_path / "summary.json").write_text(json.dumps({"train_config": recipe}))
    facts = card_facts(tmp_path / "model.pt", spm_model, tmp_path / "hf")
    assert facts["experiment"] == "base" and facts["train_config"] == recipe
    assert facts["command"] == (
        f"transformer-core export --checkpoint {tmp_path / 'model.pt'} --spm {spm_model} "
        f"--format transformers --out {tmp_path / 'hf'}"
    )
    card = model_card(model, facts)
    assert "1,200 steps of 25,000 target tokens, warmup 40, lr_scale 1.0, seed 7." in card
    del facts["train_config"]["lr_scale"]  # an older run's recipe: no line rather than a crash
    assert "target tokens, warmup" not in model_card(model, facts)
    assert "target tokens, warmup" not in model_card(model, {**facts, "train_config": None})


def test_the_card_and_generation_config_carry_the_search_that_made_the_score(tmp_path, spm_model):
    checkpoint(tmp_path / "model.pt")
    decoding = {"beam": 2, "alpha": 1.5, "from": {"beam": "config", "alpha": "dev"}}
    score = {"sacrebleu": 27.31, "bleu_paper_style": 28.02, "decoding": decoding}
    (tmp_path / "score.json").write_text(json.dumps(score))
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 0
    card = (tmp_path / "hf" / CARD).read_text()
    assert "(beam 2, GNMT's length penalty with alpha 1.5, chosen on the dev set)" in card
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["length_penalty"]) == (2, 1.5)
    # Greedy search (beam 1) has no length penalty for transformers to refuse.
    score["decoding"] = {"beam": 1, "alpha": 1.5, "from": {"beam": "config", "alpha": "config"}}
    (tmp_path / "score.json").write_text(json.dumps(score))
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 0
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert generation["num_beams"] == 1 and "length_penalty" not in generation


@pytest.mark.parametrize(
    "overrides, named",
    [({"positional": "learned"}, "positional='learned'"), ({"d_k": 4}, "d_k=4")],
)
def test_what_marian_cannot_express_is_one_line(tmp_path, spm_model, capsys, overrides, named):
    checkpoint(tmp_path / "model.pt", **overrides)
    assert export(tmp_path, spm_model) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1 and not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    "decoding, named",
    [({"beam": 0, "alpha": -1}, "beam must be at least 1"),
     ({"beam": 4, "alpha": -1}, "alpha must be at least 0"),
     ({"beam": "x", "alpha": 0.6}, "beam must be an integer"),
     ("beam 4", "its decoding record is not a mapping")],
)  # fmt: skip
def test_a_score_whose_decoding_record_is_impossible_is_refused(
    tmp_path, spm_model, capsys, decoding, named
):
    checkpoint(tmp_path / "model.pt")
    score = {"sacrebleu": 27.31, "bleu_paper_style": 28.02, "decoding": decoding}
    (tmp_path / "score.json").write_text(json.dumps(score))
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 2
    err = capsys.readouterr().err
    assert "--score" in err and named in err and not (tmp_path / "hf").exists()


def test_a_score_file_that_is_not_one_is_named(tmp_path, spm_model, capsys):
    checkpoint(tmp_path / "model.pt")
    (tmp_path / "score.json").write_text('{"bleu": 1}')
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 2
    assert "--score" in capsys.readouterr().err and not (tmp_path / "hf").exists()


def test_a_reexport_never_replaces_what_a_user_changed(tmp_path, spm_model, capsys):
    """export.json records each file's sha256: notes appended to the card, or weights saved back
    after fine-tuning, make a re-export refuse, naming the file, and keep the folder as it is."""
    checkpoint(tmp_path / "model.pt")
    assert export(tmp_path, spm_model) == 0
    card = tmp_path / "hf" / CARD
    card.write_text(card.read_text() + "\nMy notes.\n")
    capsys.readouterr()
    assert export(tmp_path, spm_model) == 2
    assert f"{CARD} has changed since the export wrote it" in capsys.readouterr().err
    assert card.read_text().endswith("My notes.\n")
    card.unlink()  # a file of the export deleted: nothing of the user's to lose
    assert export(tmp_path, spm_model) == 0 and not card.read_text().endswith("My notes.\n")
    weights = tmp_path / "hf" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")  # "fine-tuned" and saved back
    assert export(tmp_path, spm_model) == 2
    assert "model.safetensors has changed since the export wrote it" in capsys.readouterr().err


def test_a_reexport_into_an_export_without_hashes_keeps_the_users_card(tmp_path, spm_model, capsys):
    """An export from before export.json recorded each file's sha256: whether its card was
    edited cannot be told, so it is the user's, and a re-export refuses, naming it."""
    checkpoint(tmp_path / "model.pt")
    assert export(tmp_path, spm_model) == 0
    marker = tmp_path / "hf" / "export.json"
    record = json.loads(marker.read_text())
    marker.write_text(json.dumps({k: v for k, v in record.items() if k != "sha256"}))
    card = tmp_path / "hf" / CARD
    card.write_text(card.read_text() + "\nMy notes.\n")
    capsys.readouterr()
    assert export(tmp_path, spm_model) == 2
    assert "records no sha256 of" in capsys.readouterr().err
    assert card.read_text().endswith("My notes.\n")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--quantization", "int8"), "--quantization int8 is CTranslate2's weight type"),
        (
            ("--format", "ctranslate2", "--score", "SCORE"),
            "--score goes with --format transformers",
        ),
    ],
)
def test_a_flag_the_format_would_ignore_is_refused(tmp_path, spm_model, capsys, extra, named):
    checkpoint(tmp_path / "model.pt")
    (tmp_path / "score.json").write_text('{"sacrebleu": 1.0, "bleu_paper_style": 1.0}')
    extra = [str(tmp_path / "score.json") if a == "SCORE" else a for a in extra]
    assert export(tmp_path, spm_model, *extra) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1 and not (tmp_path / "hf").exists()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"sacrebleu": NaN, "bleu_paper_style": 1.0}', "sacrebleu is nan, not a finite number"),
        ('{"sacrebleu": 1.0, "bleu_paper_style": Infinity}', "bleu_paper_style is inf"),
        ('{"sacrebleu": null, "bleu_paper_style": 1.0}', "sacrebleu is not a number (None)"),
        ('{"sacrebleu": "27.3", "bleu_paper_style": 1.0}', "sacrebleu is not a number ('27.3')"),
    ],
)
def test_a_card_is_never_built_from_bad_values(tmp_path, spm_model, capsys, text, named):
    checkpoint(tmp_path / "model.pt")
    (tmp_path / "score.json").write_text(text)
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 2
    assert named in capsys.readouterr().err and not (tmp_path / "hf").exists()


def test_an_average_copied_out_of_its_run_titles_its_card_from_itself(tmp_path, spm_model, capsys):
    from transformer_core.training.average import average_files

    model = checkpoint(tmp_path / "run" / "a.pt")
    cfg = model.cfg
    save_checkpoint(tmp_path / "run" / "a.pt", cfg, model.state_dict(), experiment="big", step=1)
    save_checkpoint(tmp_path / "run" / "b.pt", cfg, model.state_dict(), experiment="big", step=2)
    average_files([tmp_path / "run" / "a.pt", tmp_path / "run" / "b.pt"], tmp_path / "model.pt")
    assert export(tmp_path, spm_model) == 0
    card = (tmp_path / "hf" / CARD).read_text()
    assert card.startswith("# big: a reproduction") and "checkpoints of steps 1, 2." in card
    # A run's summary beside the checkpoint, cut off: named, not a traceback.
    (tmp_path / "summary.json").write_text('{"experiment": "big", "train')
    assert export(tmp_path, spm_model) == 2
    assert f"{tmp_path / 'summary.json'}: not a training summary" in capsys.readouterr().err


def test_export_inputs_and_outputs_it_cannot_use_are_one_line(tmp_path, spm_model, capsys):
    checkpoint(tmp_path / "model.pt")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    base = ["export", "--format", "transformers"]
    cases = [
        (["--checkpoint", fifo, "--spm", spm_model, "--out", tmp_path / "a"],
         f"--checkpoint {fifo} is not a regular file"),
        (["--checkpoint", tmp_path, "--spm", spm_model, "--out", tmp_path / "a"],
         f"--checkpoint {tmp_path} is a directory"),
        (["--checkpoint", tmp_path / "model.pt", "--spm", fifo, "--out", tmp_path / "a"],
         f"--spm {fifo} is not a regular file"),
        (["--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", ""],
         "--out is empty"),
        (["--checkpoint", tmp_path / "model.pt", "--spm", spm_model, "--out", "."],
         "--out . is the working folder or holds it"),
    ]  # fmt: skip
    for args, named in cases:
        assert main([*base, *map(str, args)]) == 2, named
        err = capsys.readouterr().err
        assert named in err and err.count("\n") == 1, err
    assert not (tmp_path / "a").exists()
