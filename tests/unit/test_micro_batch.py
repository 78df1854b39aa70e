"""train.max_tokens: auto: the micro-batch a device gets, and what a run records of it."""

import argparse

import pytest
import torch

from transformer_core.errors import ConfigError
from transformer_core.model.config import model_config
from transformer_core.settings import TrainSettings, parse_max_tokens
from transformer_core.training import micro_batch
from transformer_core.training.micro_batch import (
    PAPER_MICRO_BATCH,
    fitting_micro_batch,
    micro_batch_tokens,
    step_memory,
)

GIB = 2**30
CPU = torch.device("cpu")


def test_a_gpu_gets_its_whole_share_of_the_step_where_it_fits():
    """One 80 GB GPU holds base and big at 25,000 tokens: one micro-batch a step."""
    for name in ("base", "big"):
        assert fitting_micro_batch(model_config(name), 25000, 80 * GIB) == 25000


def test_a_smaller_gpu_halves_the_share_until_a_step_fits():
    big = model_config("big")
    tokens = fitting_micro_batch(big, 25000, 24 * GIB)
    assert tokens == 12500  # 2 micro-batches a step on a 24 GB GPU
    assert step_memory(big, tokens) <= micro_batch.MEMORY_SHARE * 24 * GIB < step_memory(big, 25000)


def test_the_share_never_drops_below_the_papers_micro_batch():
    """Where even 3,125 tokens would not fit, auto stops there: the run's out-of-memory error
    then names --max-tokens (session.py)."""
    assert fitting_micro_batch(model_config("big"), 25000, 1 * GIB) == PAPER_MICRO_BATCH
    assert fitting_micro_batch(model_config("base"), 2000, 1 * GIB) == 2000  # a share below it


def test_step_memory_grows_with_the_tokens_and_the_model():
    base, big = model_config("base"), model_config("big")
    assert step_memory(base, 25000) > step_memory(base, 3125)
    assert step_memory(big, 25000) > 2 * step_memory(base, 25000) * 0.9


def test_auto_on_a_cpu_is_the_papers_micro_batch_and_a_number_stays():
    base = model_config("base")
    assert micro_batch_tokens(TrainSettings(), base, CPU, 1) == 3125
    assert micro_batch_tokens(TrainSettings(tokens_per_step=2000), base, CPU, 1) == 2000
    assert micro_batch_tokens(TrainSettings(tokens_per_step=25000), base, CPU, 16) == 1563
    assert micro_batch_tokens(TrainSettings(max_tokens=777), base, CPU, 1) == 777


def test_the_run_records_the_number_chosen():
    cfg = micro_batch.resolved(TrainSettings(), model_config("base"), CPU, 1)
    assert cfg.max_tokens == 3125 and cfg.accumulation(1) == 8 and cfg.batch_tokens(1) == 3125
    assert cfg.to_dict()["max_tokens"] == 3125


def test_max_tokens_takes_a_positive_integer_or_auto():
    assert parse_max_tokens("auto") == "auto" and parse_max_tokens("4000") == 4000
    for text in ("0", "-5", "many", "3.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_max_tokens(text)
    for value in (0, "big", True, 2.5):
        with pytest.raises(ConfigError, match="train.max_tokens"):
            TrainSettings(max_tokens=value)
