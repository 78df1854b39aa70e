"""Training: the loss goes down, the run directory is complete, and mistakes fail early and clearly."""

import copy
import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from conftest import TRAIN_SHAPE
from corpora import TINY, write_corpus

from transformer_core.cli import main
from transformer_core.data.dataset import ParallelDataset
from transformer_core.device import cpu_has_native_bf16
from transformer_core.errors import ConfigError, UserError
from transformer_core.evaluation.perplexity import dataset_perplexity
from transformer_core.model.checkpoint import list_checkpoints, load_checkpoint, load_model
from transformer_core.model.config import ModelConfig, experiment, model_config, parse_overrides
from transformer_core.settings import TrainSettings
from transformer_core.training import loss, run_dir
from transformer_core.training.distributed import DistContext
from transformer_core.training.run_dir import RunFolder
from transformer_core.training.runtime import resolve_runtime
from transformer_core.training.schedule import learning_rate
from transformer_core.training.session import train
from transformer_core.training.step import Trainer, TrainingDiverged

# Numbers of torch's kernels: .ci/run runs this file again on the other CPU kinds' kernels.
pytestmark = pytest.mark.kernels

# Two steps of the tiny model, two micro-batches each, a checkpoint and a log line at each step.
TWO_STEPS = TrainSettings(
    steps=2,
    max_tokens=64,
    tokens_per_step=128,
    warmup=10,
    checkpoint_interval=1,
    log_interval=1,
    num_threads=1,
)


@dataclass(frozen=True)
class TrainedRun:
    """A finished run: its training corpus, run folder, settings and the summary ``train`` returned."""

    corpus: Path
    run: Path
    cfg: TrainSettings
    summary: dict


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> TrainedRun:
    """The ``TWO_STEPS`` run of ``TRAIN_SHAPE``, trained once for the tests that only read it."""
    root = tmp_path_factory.mktemp("trained_run")
    corpus = write_corpus(root / "train")
    summary = train(corpus, root / "run", "base", TWO_STEPS, TRAIN_SHAPE)
    return TrainedRun(corpus, root / "run", TWO_STEPS, summary)


@pytest.fixture
def own_trained_run(trained_run, tmp_path) -> TrainedRun:
    """A copy of ``trained_run`` in the test's own folder, for the tests that resume, retrain or
    edit the run (a finished run folder holds no path of its own but in ``train.log``'s text)."""
    run = shutil.copytree(trained_run.run, tmp_path / "run")
    return replace(trained_run, run=run, summary=copy.deepcopy(trained_run.summary))


@pytest.mark.parametrize(
    ("precision", "compute_weights"),
    [
        ("fp32", "fp32"),
        ("auto", "fp32"),
        pytest.param(
            "bf16",
            "bf16",
            marks=pytest.mark.skipif(not cpu_has_native_bf16(), reason="bf16 needs native bf16"),
        ),
    ],
    ids=["fp32", "auto", "bf16-weights"],
)
def test_tiny_model_fits_20_pairs(tmp_path, precision, compute_weights):
    """In exact fp32, in ``auto`` (bf16 autocast on this CPU where it computes bf16 natively),
    and with bf16 compute weights beside the fp32 ones."""
    corpus = write_corpus(tmp_path / "train")
    cfg = TrainSettings(
        steps=150,
        max_tokens=200,
        tokens_per_step=200,
        warmup=30,
        log_interval=10,
        checkpoint_interval=50,
        keep_last=2,
        num_threads=1,
        precision=precision,
        compute_weights=compute_weights,
    )
    summary = train(
        corpus,
        tmp_path / "run",
        "base",
        cfg,
        {**TRAIN_SHAPE, "dropout": 0.0, "label_smoothing": 0.0},
        dev_prefix=corpus,
    )
    losses = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    train_losses = [r["loss"] for r in losses if r["event"] == "train"]
    assert train_losses[0] > 2.5  # about log(24) at the start
    assert summary["final_train_loss"] < 0.1 * train_losses[0]
    assert summary["dev_ppl"] < 1.5 and summary["steps"] == 150
    assert summary["tokens_tgt"] == summary["token_counts"]["tgt_tokens"] > 0
    assert (
        summary["flops_analytic"] > 0 and summary["flops_paper_method"] is None
    )  # CPU: not in the table
    # Checkpoints every 50 steps, the last 2 kept; last.pt is the final one and loads alone.
    run = tmp_path / "run"
    assert [s for s, _ in list_checkpoints(run / "checkpoints")] == [100, 150]
    assert load_checkpoint(run / "last.pt")["step"] == 150
    assert load_model(run / "last.pt").cfg.vocab_size == 24
    # The precision used is recorded; master weights stay fp32 under bf16 autocast.
    used = (
        "bf16" if precision == "bf16" or precision == "auto" and cpu_has_native_bf16() else "fp32"
    )
    payload = load_checkpoint(run / "last.pt")
    assert summary["precision"] == payload["precision"] == used
    assert all(t.dtype == torch.float32 for t in payload["model"].values() if t.is_floating_point())
    dev = [r for r in losses if r["event"] == "dev"]
    assert [r["step"] for r in dev] == [50, 100, 150]


def test_final_dev_perplexity_is_what_the_ppl_command_computes(tmp_path):
    """Table 3's PPL column is the run's final dev evaluation: it must equal `transformer-core ppl`."""
    corpus = write_corpus(tmp_path / "train")
    dev = write_corpus(tmp_path / "dev", n=7, seed=1)
    cfg = TrainSettings(
        steps=12,
        max_tokens=200,
        tokens_per_step=200,
        warmup=4,
        log_interval=6,
        checkpoint_interval=6,
        keep_last=1,
        num_threads=1,
    )
    summary = train(corpus, tmp_path / "run", "base", cfg, TRAIN_SHAPE, dev_prefix=dev)
    model = load_model(tmp_path / "run" / "last.pt")
    assert dataset_perplexity(model, dev).perplexity == pytest.approx(summary["dev_ppl"], rel=1e-6)


def test_dev_interval_scores_dev_on_its_own_steps_and_at_the_end(tmp_path):
    """--dev-interval parts the dev scoring from the checkpoints; each checkpoint names the
    step of the dev loss it holds."""
    corpus = write_corpus(tmp_path / "train", n=12)
    cfg = TrainSettings(
        steps=7,
        max_tokens=200,
        tokens_per_step=200,
        warmup=4,
        log_interval=7,
        checkpoint_interval=2,
        dev_interval=3,
        keep_last=4,
        num_threads=1,
    )
    train(corpus, tmp_path / "run", "base", cfg, TRAIN_SHAPE, dev_prefix=corpus)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r["event"] == "dev"] == [3, 6, 7]
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("step_*.pt"))
    held = [load_checkpoint(path)["metrics"].get("dev_step") for path in checkpoints]
    assert held == [None, 3, 6, 7]  # the checkpoints of steps 2, 4, 6 and 7
    with pytest.raises(ConfigError, match="train.dev_interval"):
        TrainSettings(dev_interval=0)


def test_checkpoint_holds_the_training_state(trained_run):
    ckpt = load_checkpoint(trained_run.run / "checkpoints" / "step_0000002.pt")  # weights_only=True
    assert ckpt["step"] == 2 and ckpt["experiment"] == "base"
    assert ckpt["schedule"] == {
        "d_model": 32, "warmup": 10, "lr_scale": 1.0, "cooldown": 0, "steps": 2
    }  # fmt: skip
    assert set(ckpt["rng"][0]) >= {"torch", "python", "numpy"}
    assert ckpt["data"]["world_size"] == 1
    assert ckpt["optimizer"]["state"] and ckpt["train_config"]["tokens_per_step"] == 128


def test_resume_refuses_other_settings_and_finished_run_is_a_no_op(own_trained_run, capsys):
    corpus, run, cfg = own_trained_run.corpus, own_trained_run.run, own_trained_run.cfg
    with pytest.raises(UserError, match="pass --resume"):
        train(corpus, run, "base", cfg, TRAIN_SHAPE)
    summary = train(corpus, RunFolder(run, resume=True), "base", cfg, TRAIN_SHAPE)
    assert summary["steps"] == 2 and "nothing to do" in capsys.readouterr().err
    longer = TrainSettings(**{**cfg.to_dict(), "steps": 3, "lr_scale": 2.0})
    with pytest.raises(UserError, match="lr_scale=1.0"):
        train(corpus, RunFolder(run, resume=True), "base", longer, TRAIN_SHAPE)
    with pytest.raises(UserError, match="differs in d_ff"):
        train(
            corpus,
            RunFolder(run, resume=True),
            "base",
            TrainSettings(**{**cfg.to_dict(), "steps": 3}),
            {**TRAIN_SHAPE, "d_ff": 32},
        )
    # A finished run is only "nothing to do" for the settings it was made with.
    with pytest.raises(UserError, match="differs in d_ff"):
        train(
            corpus,
            RunFolder(run, resume=True),
            "base",
            cfg,
            {**TRAIN_SHAPE, "d_ff": 32},
        )


def test_a_cooled_down_run_steps_as_its_schedule_and_resumes_only_to_its_own_length(tmp_path):
    corpus = write_corpus(tmp_path / "train")
    cfg = TrainSettings(
        steps=3, max_tokens=64, tokens_per_step=64, warmup=10, checkpoint_interval=1,
        num_threads=1, cooldown=2,
    )  # fmt: skip
    train(corpus, tmp_path / "run", "base", cfg, TRAIN_SHAPE)
    for step in (1, 2, 3):  # Adam's last update used the cooled rate: 1/2 of the paper's at 3
        ckpt = load_checkpoint(tmp_path / "run" / "checkpoints" / f"step_{step:07d}.pt")
        lr = ckpt["optimizer"]["param_groups"][0]["lr"]
        assert lr == learning_rate(step, 32, 10) * (1.0, 1.0, 0.5)[step - 1]
    folder = run_dir.RunDir(tmp_path / "run", resume=True, restart_if_changed=False)
    model_cfg = ModelConfig.from_dict(folder.previous.payload["model_config"])
    longer = TrainSettings(**{**cfg.to_dict(), "steps": 4})
    with pytest.raises(UserError, match="cools down over the last 2 of 3 steps, not of --steps 4"):
        folder.decide(model_cfg, longer, None)
    # A run written before the setting existed resumes as one without a cooldown.
    del folder.previous.payload["train_config"]["cooldown"]
    paper = TrainSettings(**{**cfg.to_dict(), "steps": 4, "cooldown": 0})
    assert folder.decide(model_cfg, paper, None).kind == "resume"


def test_run_dir_plans_nothing_to_do_resume_start_over_or_fresh(trained_run, tmp_path):
    cfg, summary = trained_run.cfg, trained_run.summary
    folder = run_dir.RunDir(trained_run.run, resume=True, restart_if_changed=True)
    model_cfg = ModelConfig.from_dict(folder.previous.payload["model_config"])
    assert folder.decide(model_cfg, cfg, None) == run_dir.Start("finished", summary=summary)
    longer = TrainSettings(**{**cfg.to_dict(), "steps": 3})
    resume = folder.decide(model_cfg, longer, None)
    assert resume.kind == "resume" and resume.payload["step"] == 2
    assert resume.checkpoint == folder.paths.checkpoints / "step_0000002.pt"
    other = model_cfg.replace(d_ff=32)
    start_over = folder.decide(other, cfg, None)
    assert start_over.kind == "start_over" and "differs in d_ff" in start_over.why
    strict = run_dir.RunDir(trained_run.run, resume=True, restart_if_changed=False)
    with pytest.raises(UserError, match="cannot resume from .*step_0000002.pt: its model config"):
        strict.decide(other, cfg, None)
    fresh = run_dir.RunDir(tmp_path / "new", resume=True, restart_if_changed=False)
    assert fresh.previous.payload is None
    assert fresh.decide(model_cfg, cfg, None) == run_dir.Start("fresh")


def test_restart_if_changed_moves_the_old_run_aside_and_retrains(own_trained_run, capsys):
    corpus, run, cfg = own_trained_run.corpus, own_trained_run.run, own_trained_run.cfg
    first = own_trained_run.summary
    changed = {**TRAIN_SHAPE, "d_ff": 32}
    with pytest.raises(UserError, match="goes with --resume"):
        train(corpus, RunFolder(run, restart_if_changed=True), "base", cfg, changed)
    summary = train(
        corpus, RunFolder(run, resume=True, restart_if_changed=True), "base", cfg, changed
    )
    assert "moved it to" in capsys.readouterr().err
    assert summary["model_config"]["d_ff"] == 32 and load_model(run / "last.pt").cfg.d_ff == 32
    old = run / "superseded" / "1"
    assert json.loads((old / "summary.json").read_text()) == first  # kept, not deleted
    assert [s for s, _ in list_checkpoints(old / "checkpoints")] == [1, 2]
    # The retrained run is another run: its checkpoints carry a new run id.
    assert load_checkpoint(run / "last.pt")["run_id"] != load_checkpoint(old / "last.pt")["run_id"]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]  # the new run's metrics only
    # Same settings again: resumed as finished, nothing moved.
    train(corpus, RunFolder(run, resume=True, restart_if_changed=True), "base", cfg, changed)
    assert "nothing to do" in capsys.readouterr().err and not (run / "superseded" / "2").exists()


def test_accumulation_matches_the_paper_on_any_device_count():
    cfg = TrainSettings(max_tokens=3125)  # 25000 target tokens per step, 3125 per micro-batch
    assert [cfg.accumulation(n) for n in (1, 2, 4, 8, 16)] == [8, 4, 2, 1, 1]
    assert TrainSettings(max_tokens=4096).accumulation(1) == 7
    assert TrainSettings.for_experiment(experiment("big")).checkpoint_interval == 600
    assert TrainSettings.for_experiment(experiment("big")).steps == 300_000
    with pytest.raises(ConfigError, match="train.keep_last"):
        TrainSettings(keep_last=0)


def test_bad_set_key_is_a_clean_error(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "train")
    code = main(
        ["train", "--train", str(corpus), "--out-dir", str(tmp_path / "run"), "--set", "d_modle=3"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "d_modle" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="dropout takes a float"):
        parse_overrides(["dropout=high"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_overrides(["d_model"])
    assert parse_overrides(["d_model=64", "dropout=0.3", "positional=learned"]) == {
        "d_model": 64,
        "dropout": 0.3,
        "positional": "learned",
    }
    code = main(
        [
            "train",
            "--train",
            str(corpus),
            "--out-dir",
            str(tmp_path / "run"),
            "--set",
            "vocab_size=9",
        ]
    )
    assert code == 2 and "comes from the dataset" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def run_cli(capsys, *args):
    """The CLI in this process (no second torch import): exit status and stderr."""
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def test_impossible_batch_fails_early_with_advice(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "train", min_len=10, max_len=12)
    code, err = run_cli(
        capsys,
        "train",
        "--train",
        corpus,
        "--out-dir",
        tmp_path / "run",
        *TINY,
        "--max-tokens",
        "8",
    )
    assert code == 2 and "raise max_tokens" in err
    code, err = run_cli(
        capsys,
        "train",
        "--train",
        corpus,
        "--out-dir",
        tmp_path / "run",
        *TINY,
        "--set",
        "positional=learned",
        "--set",
        "max_positions=8",
    )
    assert code == 2 and "max_positions=13" in err


def test_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "train")
    # An absurd learning rate drives the weights to infinity within a few steps.
    code, err = run_cli(
        capsys,
        "train",
        "--train",
        corpus,
        "--out-dir",
        tmp_path / "run",
        *TINY,
        "--steps",
        "50",
        "--max-tokens",
        "64",
        "--tokens-per-step",
        "64",
        "--warmup",
        "1",
        "--lr-scale",
        "1e30",
        "--checkpoint-interval",
        "1",
        "--keep-last",
        "50",
        "--num-threads",
        "1",
    )
    assert (
        code == 2 and "loss is not finite" in err and "last checkpoint before the loss rose" in err
    )
    kept = list_checkpoints(tmp_path / "run" / "checkpoints")
    assert kept and kept[-1][0] < 50 and str(kept[-1][1]) in err
    assert not (tmp_path / "run" / "summary.json").exists()
    state = load_checkpoint(kept[-1][1])["model"]
    assert all(not torch.isnan(t).any() for t in state.values())


def test_out_of_memory_says_to_lower_max_tokens(tmp_path, capsys, monkeypatch):
    def exhausted(self):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"
        )

    monkeypatch.setattr(Trainer, "train_step", exhausted)
    corpus = write_corpus(tmp_path / "train")
    code, err = run_cli(
        capsys,
        "train",
        "--train",
        corpus,
        "--out-dir",
        tmp_path / "run",
        *TINY,
        "--max-tokens",
        "64",
        "--tokens-per-step",
        "128",
    )
    assert code == 2 and "out of memory at step 1" in err and "lower --max-tokens" in err


def test_dev_loss_with_wrong_sources_detects_use_of_the_source(tmp_path):
    """A model that learned to reverse its source scores targets against other sources far worse."""
    corpus = write_corpus(
        tmp_path / "train", n=40, min_len=5, max_len=5
    )  # one length: full batches
    cfg = TrainSettings(
        steps=150,
        max_tokens=200,
        tokens_per_step=200,
        warmup=30,
        log_interval=50,
        checkpoint_interval=150,
        keep_last=1,
        num_threads=1,
    )
    summary = train(
        corpus,
        tmp_path / "run",
        "base",
        cfg,
        {**TRAIN_SHAPE, "dropout": 0.0, "label_smoothing": 0.0},
        dev_prefix=corpus,
    )
    dev = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ][-1]
    assert dev["event"] == "dev" and dev["dev_loss"] == pytest.approx(summary["dev_loss"])
    assert dev["dev_loss_wrong_src"] > dev["dev_loss"] + 1.0


def test_checkpoint_written_before_init_existed_resumes(own_trained_run, capsys):
    """A checkpoint whose model config lacks a newer key (init) continues: the key takes its default."""
    corpus, run, cfg = own_trained_run.corpus, own_trained_run.run, own_trained_run.cfg
    for _, path in list_checkpoints(run / "checkpoints"):
        payload = torch.load(path, weights_only=True)
        del payload["model_config"]["init"], payload["model_config"]["init_std"]
        torch.save(payload, path)
    summary = train(
        corpus,
        RunFolder(run, resume=True, restart_if_changed=True),
        "base",
        TrainSettings(**{**cfg.to_dict(), "steps": 3}),
        TRAIN_SHAPE,
    )
    assert summary["steps"] == 3 and "resuming from" in capsys.readouterr().err
    assert not (run / "superseded").exists()


def test_trained_model_decodes_what_it_learned(tmp_path):
    """Learning and decoding end to end: a model trained to reverse its source, decoded by beam
    search, reverses held-out sources. A bug that stops learning, the source path or decoding fails it."""
    from transformer_core.data.dataset import ParallelDataset
    from transformer_core.decoding.translate import translate_ids
    from transformer_core.model.checkpoint import load_model
    from transformer_core.settings import DecodeSettings

    corpus = write_corpus(tmp_path / "train", n=400, vocab=20, min_len=3, max_len=6)
    held_out = write_corpus(tmp_path / "dev", n=30, vocab=20, seed=1, min_len=3, max_len=6)
    cfg = TrainSettings(
        steps=600,
        max_tokens=400,
        tokens_per_step=400,
        warmup=60,
        lr_scale=0.2,
        log_interval=300,
        checkpoint_interval=600,
        keep_last=1,
        num_threads=1,
    )
    overrides = {
        **TRAIN_SHAPE,
        "d_model": 64,
        "d_ff": 128,
        "d_k": 32,
        "d_v": 32,
        "dropout": 0.0,
        "init": "normal",
    }
    summary = train(corpus, tmp_path / "run", "base", cfg, overrides, dev_prefix=held_out)
    # Seeds 1-4 measured: dev PPL 1.11-1.17, 29 or 30 of 30 reversed.
    assert summary["dev_ppl"] < 1.3
    model = load_model(tmp_path / "run" / "last.pt")
    dev = ParallelDataset(held_out)
    sources = [dev.src(i).tolist() for i in range(len(dev))]
    outputs = translate_ids(model, sources, DecodeSettings(beam=4, max_len_b=10))
    correct = sum(out == src[::-1] for src, out in zip(sources, outputs, strict=True))
    assert correct >= 27, f"{correct} of 30 held-out sources reversed"


def test_a_non_finite_step_leaves_the_weights_and_the_next_read_raises(tmp_path):
    """The divergence check runs on the device: from the first step whose loss is not finite
    on, fused Adam skips the update; the loop's next read raises, naming that step."""
    corpus = ParallelDataset(write_corpus(tmp_path / "train"))
    cfg = TrainSettings(max_tokens=64, tokens_per_step=64, warmup=4, precision="fp32")
    ctx = DistContext(0, 0, 1, torch.device("cpu"), owns_group=False)
    trainer = Trainer.fresh(model_config("base", vocab_size=24, **TRAIN_SHAPE), cfg, ctx, corpus)
    try:
        trainer.train_step()
        trainer.interval_sums()  # finite: no error
        assert trainer.skips_on_device  # fused Adam on this torch
        with torch.no_grad():
            trainer.model.embedding.weight[5:, 0] = float("nan")
        poisoned = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        adam_step = trainer.optimizer.state[trainer.model.embedding.weight]["step"].clone()
        for _ in range(2):
            trainer.train_step()
        after = trainer.model.state_dict()
        for name, value in poisoned.items():
            torch.testing.assert_close(after[name], value, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(
            trainer.optimizer.state[trainer.model.embedding.weight]["step"], adam_step
        )
        with pytest.raises(TrainingDiverged, match="not finite at step 2"):
            trainer.raise_if_diverged()
        with pytest.raises(TrainingDiverged, match="not finite at step 2"):
            trainer.interval_sums()
    finally:
        trainer.close()


def test_gradients_owned_across_micro_batches_give_the_same_step(tmp_path, monkeypatch):
    """Where the stacks run as CUDA graphs, whose gradients the next micro-batch's replay
    overwrites, the trainer sums the micro-batches' gradients into its own (kept between
    steps, zeroed): the weights come out bit for bit as where autograd's own are summed."""
    corpus = ParallelDataset(write_corpus(tmp_path / "train"))
    cfg = TrainSettings(max_tokens=32, tokens_per_step=64, warmup=4, precision="fp32")
    ctx = DistContext(0, 0, 1, torch.device("cpu"), owns_group=False)
    model_cfg = model_config("base", vocab_size=24, **{**TRAIN_SHAPE, "dropout": 0.0})
    weights = []
    for graphs in (False, True):  # True: as on CUDA with fixed shapes (here eager, on the CPU)
        monkeypatch.setattr(loss, "compile_options", lambda *_, g=graphs: {"triton.cudagraphs": g})
        trainer = Trainer.fresh(model_cfg, cfg, ctx, corpus)
        try:
            assert trainer.accumulation == 2 and trainer.owns_gradients == graphs
            owned = [p.grad for p in trainer.model.parameters()]
            for _ in range(3):
                trainer.train_step()
            now = [p.grad for p in trainer.model.parameters()]
            if graphs:  # the same tensors, zeroed after the step
                assert all(a is b and not b.any() for a, b in zip(owned, now, strict=True))
            else:
                assert all(g is None for g in owned + now)
            weights.append([p.detach().clone() for p in trainer.model.parameters()])
        finally:
            trainer.close()
    assert all(torch.equal(a, b) for a, b in zip(*weights, strict=True))


def test_the_session_resolves_the_runtime_once_and_the_trainer_takes_it(tmp_path, monkeypatch):
    """Micro-batch, autocast and path are resolved once, by the session (training/runtime.py);
    the ``Trainer`` takes the result and resolves nothing again."""
    from transformer_core.training import session, step

    calls = []

    def counted(*args):
        calls.append(args)
        return resolve_runtime(*args)

    def refused(*args):
        raise AssertionError("the Trainer resolved the run's runtime again")

    monkeypatch.setattr(session, "resolve_runtime", counted)
    monkeypatch.setattr(step, "resolve_runtime", refused)
    corpus = write_corpus(tmp_path / "train")
    summary = train(corpus, tmp_path / "run", "base", replace(TWO_STEPS, steps=1), TRAIN_SHAPE)
    assert summary["steps"] == 1 and len(calls) == 1
