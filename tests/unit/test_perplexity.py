"""Perplexity: the batched computation against a sentence-by-sentence one, and the CLI."""

import json
import math
import subprocess
import sys

import pytest
import torch
from conftest import tiny_config, tiny_model

from transformer_core.data.binarized import BinarizedWriter
from transformer_core.errors import UserError
from transformer_core.evaluation.perplexity import dataset_perplexity, model_perplexity
from transformer_core.model.checkpoint import save_checkpoint
from transformer_core.model.transformer import Transformer

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

BOS, EOS = 2, 3
VOCAB = 30


# label_smoothing is stored with the model; perplexity must ignore it.
CFG = tiny_config(vocab_size=VOCAB, encoder_layers=1, dropout=0.1, label_smoothing=0.1)


def random_pairs(n=23, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def sentence():
        return torch.randint(
            4, VOCAB, (int(torch.randint(1, 12, (1,), generator=gen)),), generator=gen
        ).tolist()

    return [(sentence(), sentence()) for _ in range(n)]


def direct_perplexity(model, pairs):
    """One sentence at a time, no padding anywhere: exp(total NLL / total target tokens)."""
    nll, tokens = 0.0, 0
    with torch.no_grad():
        for src, tgt in pairs:
            logits = model(torch.tensor([src + [EOS]]), torch.tensor([[BOS] + tgt]))[0]
            log_probs = torch.log_softmax(logits.double(), dim=-1)
            nll -= sum(log_probs[i, t].item() for i, t in enumerate(tgt + [EOS]))
            tokens += len(tgt) + 1
    return math.exp(nll / tokens), tokens


@pytest.fixture
def binarized(tmp_path):
    pairs = random_pairs()
    with BinarizedWriter(tmp_path / "dev", vocab_size=VOCAB) as writer:
        for src, tgt in pairs:
            writer.add(src, tgt)
    return tmp_path / "dev", pairs


def test_dataset_perplexity_matches_a_direct_computation(binarized):
    prefix, pairs = binarized
    model = tiny_model(CFG)
    expected, tokens = direct_perplexity(model, pairs)
    result = dataset_perplexity(model, prefix, max_tokens=40)  # several padded batches
    assert result.tokens == tokens
    assert result.sentences == len(pairs)
    assert result.perplexity == pytest.approx(expected, rel=1e-5)


def test_perplexity_over_plain_tensors_ignores_padding():
    model = tiny_model(CFG, seed=1)
    pairs = random_pairs(n=2, seed=3)
    expected, _ = direct_perplexity(model, pairs)
    src = torch.zeros(2, 20, dtype=torch.long)
    tgt_in = torch.zeros(2, 20, dtype=torch.long)
    tgt_out = torch.zeros(2, 20, dtype=torch.long)
    for row, (s, t) in enumerate(pairs):
        src[row, : len(s) + 1] = torch.tensor(s + [EOS])
        tgt_in[row, : len(t) + 1] = torch.tensor([BOS] + t)
        tgt_out[row, : len(t) + 1] = torch.tensor(t + [EOS])
    result = model_perplexity(model, [(src, tgt_in, tgt_out)])
    assert result.perplexity == pytest.approx(expected, rel=1e-5)
    with pytest.raises(UserError, match="empty"):
        model_perplexity(model, [])


def test_ppl_cli_writes_json(tmp_path, binarized):
    prefix, pairs = binarized
    model = tiny_model(CFG)
    save_checkpoint(tmp_path / "model.pt", model.cfg, model.state_dict())
    out = tmp_path / "ppl" / "dev.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "ppl",
            "--checkpoint",
            str(tmp_path / "model.pt"),
            "--data",
            str(prefix),
            "--out",
            str(out),
            "--max-tokens",
            "64",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    expected, tokens = direct_perplexity(model, pairs)
    assert report["perplexity"] == pytest.approx(expected, rel=1e-5)
    assert report["tokens"] == tokens and report["sentences"] == len(pairs)
    assert report["precision"] == "fp32"
    # A split from another vocabulary is refused with a clear message.
    small = CFG.replace(vocab_size=10)
    save_checkpoint(tmp_path / "small.pt", small, Transformer(small).state_dict())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_core",
            "ppl",
            "--checkpoint",
            str(tmp_path / "small.pt"),
            "--data",
            str(prefix),
            "--out",
            str(tmp_path / "x.json"),
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "do not belong together" in result.stderr
    assert not (tmp_path / "x.json").exists()
