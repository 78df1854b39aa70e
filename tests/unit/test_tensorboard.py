"""TensorBoard curves of a training run: the logged values at the log steps, the dev scores at the
dev steps, none on other ranks or when off, and a resumed run that shows every step once."""

import json
import sys

import pytest
from conftest import TRAIN_SHAPE
from corpora import write_corpus

from transformer_core.errors import UserError
from transformer_core.model.checkpoint import list_checkpoints
from transformer_core.settings import TrainSettings
from transformer_core.training.run_dir import RunFolder
from transformer_core.training.session import train
from transformer_core.training.tensorboard import DEV_CURVES, TRAIN_CURVES, tensorboard_available

pytest.importorskip("tensorboard", reason="tensorboard not installed (the monitor extra)")


def curves(folder) -> dict[str, list[tuple[int, float]]]:
    """Every scalar curve TensorBoard reads from ``folder``, as (step, value) pairs."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def recipe(**overrides) -> TrainSettings:
    settings = dict(steps=12, max_tokens=200, tokens_per_step=200, warmup=4, log_interval=3,
                    checkpoint_interval=6, keep_last=2, num_threads=1)  # fmt: skip
    return TrainSettings(**{**settings, **overrides})


def test_the_logged_values_are_the_curves(tmp_path):
    corpus = write_corpus(tmp_path / "train", n=12)
    summary = train(corpus, tmp_path / "run", "base", recipe(), TRAIN_SHAPE, dev_prefix=corpus)
    written = curves(tmp_path / "run" / "tensorboard")
    assert set(written) == set(TRAIN_CURVES.values()) | set(DEV_CURVES.values())
    assert [step for step, _ in written["train/loss"]] == [3, 6, 9, 12]
    assert [step for step, _ in written["dev/perplexity"]] == [6, 12]
    assert written["dev/perplexity"][-1][1] == pytest.approx(summary["dev_ppl"], rel=1e-6)
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    losses = [(r["step"], r["loss"]) for r in logged if r["event"] == "train"]
    assert [value for _, value in written["train/loss"]] == pytest.approx([v for _, v in losses])


def test_no_curves_when_off(tmp_path):
    corpus = write_corpus(tmp_path / "train", n=12)
    train(corpus, tmp_path / "run", "base", recipe(tensorboard=False), TRAIN_SHAPE)
    assert not (tmp_path / "run" / "tensorboard").exists()


def killed_after_step_6(run):
    """The run as a session killed after its step-6 checkpoint (which had logged 9 and 12)
    leaves it."""
    for step, path in list_checkpoints(run / "checkpoints"):
        if step > 6:
            path.unlink()
    for name in ("summary.json", "last.pt"):
        (run / name).unlink()


def test_a_resumed_run_shows_every_step_once(tmp_path):
    """A session killed after its checkpoint at step 6 had logged steps 9 and 12; the resumed
    session logs them again, and TensorBoard keeps the second's only."""
    corpus = write_corpus(tmp_path / "train", n=12)
    run = tmp_path / "run"
    train(corpus, run, "base", recipe(), TRAIN_SHAPE)
    first = curves(run / "tensorboard")["train/loss"]
    killed_after_step_6(run)
    train(corpus, RunFolder(run, resume=True), "base", recipe(), TRAIN_SHAPE)
    resumed = curves(run / "tensorboard")["train/loss"]
    assert [step for step, _ in resumed] == [3, 6, 9, 12]
    values = [value for _, value in resumed]
    assert values == pytest.approx([value for _, value in first], rel=1e-6)  # as if never killed


def raw_steps(folder) -> list[int]:
    """The steps of train/loss in the event files as any reader sees them: every record."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return sorted(
        event.step
        for path in sorted(folder.glob("events.out.tfevents.*"))
        for event in EventFileLoader(str(path)).Load()
        if any(value.tag == "train/loss" for value in event.summary.value)
    )


def test_a_resumed_run_holds_every_step_once_in_its_files(tmp_path):
    """TensorBoard's reader hid a killed session's steps (purge_step); other readers of the
    event files saw them twice: they are now removed from the files."""
    corpus = write_corpus(tmp_path / "train", n=12)
    run = tmp_path / "run"
    train(corpus, run, "base", recipe(), TRAIN_SHAPE)
    killed_after_step_6(run)
    train(corpus, RunFolder(run, resume=True), "base", recipe(), TRAIN_SHAPE)
    assert raw_steps(run / "tensorboard") == [3, 6, 9, 12]


def test_what_stands_in_the_writers_way_is_one_line(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "train", n=12)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "tensorboard").write_text("my notes\n")
    with pytest.raises(UserError, match=r"tensorboard is a file, where the run writes"):
        train(corpus, tmp_path / "run", "base", recipe(), TRAIN_SHAPE)
    assert (tmp_path / "run" / "tensorboard").read_text() == "my notes\n"
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # tensorboard without it
    assert not tensorboard_available()
