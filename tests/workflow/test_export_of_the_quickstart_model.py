"""export of a trained model: the averaged EN-DE base model of the session's quickstart decodes
the same tokens in CTranslate2 as in the project, greedy and beam 4 at its natural lengths,
with every token's log-probability the same. Skipped, saying why, where the serve extra
(ctranslate2) is not installed."""

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
