"""int8 decoding: a dynamic int8 copy that leaves the model alone, decodes close to fp32, and is
refused (one line) where it cannot run; ``translate --quantize int8`` end to end."""

import subprocess
import sys

import pytest
import torch
from conftest import tiny_config, tiny_model
from corpora import generated_sentences
from test_translate import make_checkpoint, spm_model  # noqa: F401
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from transformer_core.decoding.inference import inference_model
from transformer_core.decoding.quantize import check_int8_device, int8_model
from transformer_core.decoding.search import beam_search_nbest
from transformer_core.errors import UserError

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

SHAPE = dict(vocab_size=300, d_model=64, d_ff=256, d_k=16, d_v=16, max_positions=128)


def test_int8_copy_quantizes_every_matrix_product_and_leaves_the_model():
    model = tiny_model(tiny_config(**SHAPE), sharp=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    quantized = int8_model(model)
    linears = [m for m in quantized.modules() if isinstance(m, DynamicQuantizedLinear)]
    # 4 projections per attention (3 attentions a layer pair), 2 feed-forward, the vocabulary.
    assert len(linears) == 2 * (4 + 2) + 2 * (8 + 2) + 1
    assert all(m.weight().qscheme() == torch.per_channel_affine for m in linears)
    assert type(model.decoder_layers[0].feed_forward.w_1) is torch.nn.Linear
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())

    src = torch.randint(
        4, SHAPE["vocab_size"], (32, 15), generator=torch.Generator().manual_seed(0)
    )
    src[:, -1] = model.cfg.eos_id
    with torch.no_grad():
        exact, approx = model(src, src), quantized(src, src)
    assert (exact - approx).norm() / exact.norm() < 0.1
    # Where fp32's best hypothesis is a near tie with its second, the int8 activations' rounding
    # (which the CPU's kernels change) decides; where it wins by a margin, int8 must agree.
    fp32 = beam_search_nbest(model, src, nbest=2)
    int8 = beam_search_nbest(quantized, src, nbest=1)
    clear = [(a[0], b[0]) for a, b in zip(fp32, int8, strict=True) if a[0].score - a[1].score > 0.5]
    assert len(clear) >= 6  # enough clear choices to test
    assert all(a.tokens == b.tokens for a, b in clear)


def test_int8_is_refused_off_the_cpu_and_under_bf16():
    check_int8_device(torch.device("cpu"), None)
    with pytest.raises(UserError, match="runs on a CPU"):
        check_int8_device(torch.device("cuda"), None)
    with pytest.raises(UserError, match="not bf16"):
        check_int8_device(torch.device("cpu"), torch.bfloat16)
    with pytest.raises(UserError, match="not bf16"):  # the library path checks too
        inference_model(tiny_model(tiny_config()), torch.bfloat16, int8=True)


def test_translate_quantize_int8_end_to_end(tmp_path, spm_model):  # noqa: F811
    make_checkpoint(tmp_path / "model.pt", 60)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(generated_sentences(20, seed=5)) + "\n")
    base = [sys.executable, "-m", "transformer_core", "translate", "--checkpoint"]
    base += [tmp_path / "model.pt", "--spm", spm_model, "--input", source, "--quantize", "int8"]
    proc = subprocess.run(
        [*map(str, base), "--output", tmp_path / "out.txt"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "precision int8 (dynamic)" in proc.stderr
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 20

    proc = subprocess.run(
        [*map(str, base), "--precision", "bf16", "--output", tmp_path / "bf.txt"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and not (tmp_path / "bf.txt").exists()
    assert proc.stderr.count("\n") == 1, proc.stderr
