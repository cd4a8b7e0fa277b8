"""Small real pieces for the compression tests: a slice of the demo set, a trained small_cnn and
an evaluator that prunes, fine-tunes and measures for real, with budgets small enough for CI."""
from __future__ import annotations

import pytest
import torch

from trainpilot.compress.evaluate import Evaluator
from trainpilot.compress.finetune import tensors, train_steps
from trainpilot.compress.job import split_three
from trainpilot.compress.prune import check_prunable
from trainpilot.compress.target import this_machine
from trainpilot.job.data import demo_dataset
from trainpilot.job.models import build_model

SHAPE = (1, 28, 28)


@pytest.fixture(scope="session")
def demo_small():
    return demo_dataset(600, seed=5)


@pytest.fixture(scope="session")
def splits(demo_small):
    train, val, test = split_three(demo_small, 0)
    return tensors(train), tensors(val), tensors(test)


@pytest.fixture(scope="session")
def trained_cnn(splits):
    torch.manual_seed(0)
    model = build_model("small_cnn", SHAPE, 10)
    train_steps(model, splits[0], steps=60, batch=32, lr=2e-3, seed=0, threads=1)
    return model


@pytest.fixture
def evaluator(trained_cnn, splits):
    layers = check_prunable(trained_cnn, SHAPE)
    return Evaluator(
        dense=trained_cnn, layers=layers, sample_shape=SHAPE, num_classes=10, train=splits[0], val=splits[1],
        target=this_machine(), threshold=0.5, target_speedup=1.2, threads=1, batch=32, timing_batch=32,
        finetune_steps=3, timing_repeats=3,
    )
