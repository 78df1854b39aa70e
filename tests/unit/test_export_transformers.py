"""export --format transformers: a MarianMT folder that transformers loads with from_pretrained and
that computes what the project's model computes (the trained model of the quickstart:
tests/workflow/test_export_of_the_quickstart_model.py), its tokenizer the project's pieces, its
model card, and the models MarianMT cannot express refused in one line. Skipped, saying why,
where transformers (the hf extra) is not installed."""

import json

import pytest
import sentencepiece as spm
import torch
from conftest import tiny_config, tiny_model, train_spm
from corpora import generated_sentences

from transformer_core.cli import main
from transformer_core.decoding.export_transformers import CARD, marian_order
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.model.checkpoint import save_checkpoint
from transformer_core.model.transformer import sinusoidal_encoding

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
    assert "(beam 4, GNMT's length penalty with alpha 0.6)" in card  # a score without its search


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


def test_a_score_file_that_is_not_one_is_named(tmp_path, spm_model, capsys):
    checkpoint(tmp_path / "model.pt")
    (tmp_path / "score.json").write_text('{"bleu": 1}')
    assert export(tmp_path, spm_model, "--score", str(tmp_path / "score.json")) == 2
    assert "--score" in capsys.readouterr().err and not (tmp_path / "hf").exists()
