"""A Hugging Face project keeps its model, its Trainer and its TrainingArguments; TrainPilot picks the
arguments that decide where and how it trains, and its callback compares the predicted time with the
actual one.

`trainpilot.huggingface.choose(model, train_dataset, epochs=..., batch_size=...)` profiles one real batch (collated as
the Trainer collates it) through the model's own loss and returns TrainingArguments fields: use_cpu,
the DataLoader's workers, bf16/fp16 where allowed and native, torch_compile where it pays; for a CPU
plan it sets torch's threads. `TrainPilotCallback()` records the run in the history TrainPilot learns
from and writes the agent's trace to `trainer.state.log_history`. The model is a small BERT (Devlin et
al., 2019) built from its config (nothing is downloaded) classifying token sequences by whether a
marker token occurs in them.

    pip install "train-pilot[huggingface]"
    python examples/huggingface_trainer.py            # 3 epochs
    python examples/huggingface_trainer.py --small    # a few seconds
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

import trainpilot.huggingface

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


def accuracy(prediction) -> dict[str, float]:
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


def train(samples: int = 4000, epochs: int = 3, output_dir: str | None = None) -> dict[str, float]:
    """Train with the TrainingArguments TrainPilot decides; returns the evaluation metrics."""
    torch.manual_seed(0)
    model = make_model()
    train_set, eval_set = MarkedSequences(samples), MarkedSequences(max(samples // 10, 32), seed=1)
    batch_size = 16
    # planned at the Trainer's batch: without batch_size= (or args=), choose() profiles the default 8
    decided = trainpilot.huggingface.choose(model, train_set, epochs=epochs, batch_size=batch_size)
    choice = trainpilot.huggingface.last_choice(model)
    print(f"plan: {choice.plan.label}, predicted {choice.predicted_s:.2f} s, confidence {choice.confidence or 0:.2f}")
    args = TrainingArguments(
        output_dir=output_dir or tempfile.mkdtemp(prefix="hf-example-"),
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        logging_strategy="epoch",
        disable_tqdm=True,
        **decided,
    )
    callback = trainpilot.huggingface.TrainPilotCallback()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        compute_metrics=accuracy,
        callbacks=[callback],
    )
    trainer.train()
    if callback.result:  # what the callback recorded: run_id, status, plan, predicted_s, actual_s
        done = callback.result
        print(f"status: {done['status']}, predicted {done['predicted_s']:.2f} s, actual {done['actual_s']:.2f} s")
    else:
        print("not recorded:", "; ".join(callback.notes))
    for line in callback.rethinks:
        print("re-think:", line)
    return {name: float(value) for name, value in trainer.evaluate().items() if isinstance(value, (int, float))}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a tiny run (256 samples, 1 epoch)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    samples, epochs = (256, 1) if args.small else (4000, args.epochs)
    metrics = train(samples=samples, epochs=epochs)
    print("evaluation: " + ", ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items())))
    return metrics


if __name__ == "__main__":
    main()
