"""export of a trained model: the averaged EN-DE base model of the session's quickstart decodes
the same tokens in CTranslate2 as in the project, greedy and beam 4 at its natural lengths,
with every token's log-probability the same; exported to transformers, its logits are ours to
1e-4 and its greedy outputs ours on every test line. Each skipped, saying why, where its extra
(serve: ctranslate2, hf: transformers) is not installed."""

import importlib.util

import pytest
import sentencepiece as spm
import torch
from ctranslate2_engines import (
    assert_same_tokens,
    export_cli,
    needs_ctranslate2,
    ours,
    translator_of,
)

from transformer_core.model.checkpoint import load_model


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


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason='transformers not installed (the hf extra: pip install -e ".[hf]")',
)
def test_transformers_export_of_a_trained_smoke_model(smoke_quickstart, tmp_path):
    """The same model exported to MarianMT: logits on a batch, greedy on every test line."""
    from transformers import MarianMTModel, MarianTokenizer

    from transformer_core.cli import main
    from transformer_core.decoding.search import beam_search_nbest

    assert smoke_quickstart.proc.returncode == 0, smoke_quickstart.proc.stderr[-5000:]
    work = smoke_quickstart.workdir
    ckpt, spm_path = work / "runs/en_de/base/averaged.pt", work / "data/en_de/spm.model"
    out = tmp_path / "hf"
    assert main(["export", "--checkpoint", str(ckpt), "--spm", str(spm_path),
                 "--format", "transformers", "--out", str(out)]) == 0  # fmt: skip
    tokenizer = MarianTokenizer.from_pretrained(str(out))
    hf = MarianMTModel.from_pretrained(str(out)).eval()
    model, sp = load_model(ckpt), spm.SentencePieceProcessor(model_file=str(spm_path))
    lines = (work / "data/en_de/prepared/test.src").read_text().splitlines()
    eos = sp.eos_id()
    batch = tokenizer(lines[:32], return_tensors="pt", padding=True)
    with torch.no_grad():
        for i, line in enumerate(lines[:32]):  # teacher-forced on our own greedy output
            ids = torch.tensor([sp.encode(line) + [eos]])
            [[best]] = beam_search_nbest(model, ids, beam=1, alpha=0.0, max_len_a=1.0, max_len_b=50)
            target = torch.tensor([[sp.bos_id(), *best.tokens]])
            row = {k: v[i : i + 1, : len(ids[0])] for k, v in batch.items()}
            theirs = hf(**row, decoder_input_ids=target).logits
            torch.testing.assert_close(theirs, model(ids, target), atol=1e-4, rtol=0)
    same = 0
    for start in range(0, len(lines), 64):
        chunk = lines[start : start + 64]
        inputs = tokenizer(chunk, return_tensors="pt", padding=True)
        generated = hf.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=128)
        # Ours on the same batch: the tokenizer's ids are ours (<pad> is our pad id).
        bests = beam_search_nbest(model, inputs["input_ids"], beam=1, alpha=0.0, max_len_b=50)
        for row, [best], length in zip(
            generated, bests, inputs["attention_mask"].sum(1), strict=True
        ):
            tokens = [t for t in row.tolist()[1:] if t != sp.pad_id()]
            limit = int(length) + 50  # ours stops there: max_len_a 1 x the source with EOS, + 50
            ended = tokens.index(eos) if eos in tokens[:limit] else limit
            same += tokens[:ended] == best.tokens
    assert same == len(lines)
