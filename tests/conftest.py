"""The tiny Transformers the tests build: one default shape, the seeded model of a config, and
the shape the training tests train; running the workflow (``snakemake`` in a working directory
of its own, on configuration files or on a configuration dict); and the session's one run of
the README quickstart on the smoke configuration.

Test modules import these as plain names (``from conftest import tiny_config, tiny_model``;
pytest puts tests/ on ``sys.path``), not as fixtures: most use them at import time, in module
constants and ``parametrize`` lists. A test that checks something of a particular shape (a FLOP count,
a checkpoint's config) passes its differences from ``TINY_SHAPE`` as overrides, so every shape
still reads where it is used.
"""

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
import yaml

from transformer_core.model.config import ModelConfig
from transformer_core.model.transformer import Transformer

# Inductor's cache keys leave out the ATen and oneDNN capabilities, so code compiled by a session
# that imitates another CPU kind (docs/tests.md), or by one that does not, would be loaded by the
# other and compute NaNs: each kind of kernels compiles into a cache of its own.
INDUCTOR_KIND = "-".join(
    [torch.__version__, torch.backends.cpu.get_cpu_capability()]
    + [os.environ.get(name, "all") for name in ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")]
)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(
    Path(tempfile.gettempdir()) / f"torchinductor-tests-{INDUCTOR_KIND}".replace("+", "_")
)

# Milliseconds a forward pass on a 2-core CPU, yet every part there: two layers a side, several
# heads, h * d_k == d_model. No dropout, so train mode is deterministic too; 64 positions cover
# every test sequence.
TINY_SHAPE = dict(
    vocab_size=50,
    encoder_layers=2,
    decoder_layers=2,
    d_model=32,
    d_ff=64,
    h=4,
    d_k=8,
    d_v=8,
    dropout=0.0,
    max_positions=64,
)

# The model the training tests train: overrides of the base preset, which gives the rest (dropout
# and label smoothing included). About 22K parameters with their 24-token corpora.
TRAIN_SHAPE = dict(encoder_layers=1, decoder_layers=1, d_model=32, d_ff=64, h=2, d_k=16, d_v=16)


def pytest_report_header() -> str:
    """Which kernels the numeric tests run on: ATen's (``ATEN_CPU_CAPABILITY`` caps them) and
    whether oneDNN computes bf16 (``ONEDNN_MAX_CPU_ISA`` caps it), so that a run that imitates
    another CPU kind (tests.md) shows that it does."""
    from transformer_core.device import cpu_has_native_bf16

    return (
        f"torch {torch.__version__}: ATen CPU kernels {torch.backends.cpu.get_cpu_capability()}, "
        f"native bf16 {'yes' if cpu_has_native_bf16() else 'no'}"
    )


def tiny_config(**overrides) -> ModelConfig:
    """``TINY_SHAPE`` with ``overrides`` (any ModelConfig field) on top."""
    return ModelConfig(**{**TINY_SHAPE, **overrides})


def tiny_model(cfg: ModelConfig, *, seed: int = 0, sharp: bool = False) -> Transformer:
    """A Transformer of ``cfg`` in eval mode, initialized after ``torch.manual_seed(seed)``.

    ``sharp`` multiplies the shared embedding by 4: larger logits than the initialization gives,
    so sharper and more varied next-token distributions (search tests need outputs that differ
    from sentence to sentence and hypotheses whose scores are far apart).
    """
    torch.manual_seed(seed)
    model = Transformer(cfg).eval()
    if sharp:
        with torch.no_grad():
            model.embedding.weight.mul_(4.0)
    return model


def train_spm(path, lines, vocab_size, **options):
    """A BPE sentencepiece model of ``lines`` with the project's special ids, written to
    ``path`` (``options``: more trainer settings, e.g. ``split_by_unicode_script``)."""
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=writer,
        vocab_size=vocab_size,
        model_type="bpe",
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        minloglevel=2,
        **options,
    )
    path.write_bytes(writer.getvalue())
    return path


ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "config" / "smoke.yaml"
SNAKEMAKE = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
QUICKSTART = ("results/table2.csv", "results/table3.csv")


def snakemake(workdir, *args, configfiles=(SMOKE,), timeout=900, cwd=None):
    """``snakemake -s Snakefile -d workdir ARGS --configfile FILES``; the completed process.

    ``--configfile`` comes last: it takes every word after it, so targets go in ``args``.
    """
    return subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(workdir),
            *map(str, args),
            "--configfile",
            *map(str, configfiles),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def snakemake_on(tmp_path, config, *args, timeout=300):
    """``snakemake --cores 1 ARGS`` on the configuration dict ``config`` (written to
    TMP/config.yaml), in the working directory TMP/work, started from TMP."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return snakemake(
        tmp_path / "work", "--cores", "1", *args, configfiles=(path,), timeout=timeout, cwd=tmp_path
    )


@dataclass(frozen=True)
class QuickstartRun:
    workdir: Path
    wall_seconds: float
    proc: subprocess.CompletedProcess


def run_quickstart(workdir: Path) -> QuickstartRun:
    """The README quickstart, ``snakemake --cores 2 --scheduler greedy results/table2.csv ...``.

    Its time limit only catches a hang: the quickstart took 4 min 14 s on 2 AVX-512 EPYC cores
    and 11 min 6 s on 2 AVX2-only ones (docs/tests.md).
    """
    start = time.monotonic()
    proc = snakemake(
        workdir, "--cores", "2", "--scheduler", "greedy", *QUICKSTART, timeout=1800
    )  # see docs/tests.md
    return QuickstartRun(workdir, time.monotonic() - start, proc)


@pytest.fixture(scope="session")
def smoke_quickstart(tmp_path_factory):
    """The README quickstart on the smoke configuration (Tables 2 and 3 of ``config/smoke.yaml``,
    22 models: most of the suite's time), run once: the report test reads it as is, and the
    end-to-end test copies it and carries on from it.

    Tests must not change its working directory: copy it to carry on from it.
    """
    return run_quickstart(tmp_path_factory.mktemp("smoke_quickstart"))
