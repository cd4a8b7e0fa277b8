"""The same Hugging Face model as `huggingface_trainer.py`, trained as a plain TrainPilot Job: no
Trainer, no `step=`. A model whose forward takes the batch's `labels` and returns a ModelOutput with
a `loss` trains on that loss; the accuracy metric reads the output's `logits`. TrainPilot's own loop
runs it, so every plan is open to it (the split plan, the closed loop moving it mid-run, resume).

    pip install "train-pilot[huggingface]"
    python examples/huggingface_job.py            # 3 epochs
    python examples/huggingface_job.py --small    # a few seconds
    trainpilot headless run --job examples/huggingface_job.py:make_job
"""

from __future__ import annotations

import argparse

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification

import trainpilot

MARKER = 1  # the token whose presence is the label; 0 is padding, 2 is [CLS]


class MarkedSequences(Dataset):
    """`samples` sequences of `length` random tokens; half of them hold MARKER somewhere (label 1)."""

    def __init__(self, samples: int, length: int = 64, vocab: int = 1000, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.input_ids = torch.randint(3, vocab, (samples, length), generator=g)
        self.input_ids[:, 0] = 2
        self.labels = torch.randint(0, 2, (samples,), generator=g)
        where = torch.randint(1, length, (samples,), generator=g)
        marked = self.labels.bool()
        self.input_ids[marked, where[marked]] = MARKER

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.input_ids[i], "labels": self.labels[i]}


def make_model(vocab: int = 1000, length: int = 64) -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=length,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def make_job(samples: int = 4000) -> trainpilot.Job:
    """A fresh BERT per fit (a factory), its own loss from the batch's labels, AdamW as a Trainer uses."""
    return trainpilot.Job(
        make_model,
        MarkedSequences(samples),
        batch_size=32,
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3),
        metric="accuracy",
        name="bert-marker",
    )


def main(argv: list[str] | None = None) -> trainpilot.FitResult:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a tiny run (256 samples, 1 epoch)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    samples, epochs = (256, 1) if args.small else (4000, args.epochs)
    job = make_job(samples)
    report = trainpilot.plan(job, epochs=epochs)
    print(f"plan: {report.chosen['label']}, predicted {report.chosen['predicted_s']:.2f} s")
    result = trainpilot.fit(job, epochs=epochs)
    out = result.to_dict()
    print(
        f"status: {result.status}, predicted {result.predicted_s:.2f} s, actual {result.actual_s:.2f} s,"
        f" loss {out['loss']:.4f}, val_accuracy {out['val_accuracy']:.4f} ({out['loss_fn']})"
    )
    return result


if __name__ == "__main__":
    main()
