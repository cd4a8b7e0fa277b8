"""A Transformer encoder that classifies token sequences: int64 token ids in, a class out.

The model follows the encoder of "Attention Is All You Need" (Vaswani et al., 2017) with a
BERT-style head (Devlin et al., 2018): token and learned position embeddings, a [CLS] token
prepended to every sequence, `nn.TransformerEncoder` layers, and a linear layer on the [CLS]
output. The task is synthetic but needs attention: every sequence of random "word" tokens holds
one marker token somewhere, and the class is which marker it is.

    python examples/transformer_tokens.py            # plan, then train 3 epochs
    python examples/transformer_tokens.py --small    # a few seconds
    trainpilot headless run --job examples/transformer_tokens.py:make_job
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import trainpilot

CLS = 0  # token id 0 is the [CLS] token; ids 1..MARKERS are the markers; the rest are words
MARKERS = 4


class TransformerClassifier(nn.Module):
    def __init__(self, vocab: int, seq_len: int, num_classes: int, d_model: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Parameter(torch.zeros(1, seq_len + 1, d_model))  # +1: the [CLS] slot
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)
        nn.init.normal_(self.positions, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        cls = torch.full((ids.shape[0], 1), CLS, dtype=ids.dtype, device=ids.device)
        x = self.tokens(torch.cat([cls, ids], dim=1)) + self.positions[:, : ids.shape[1] + 1]
        return self.head(self.norm(self.encoder(x)[:, 0]))


def make_tokens(samples: int, seq_len: int = 32, vocab: int = 200, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`(X, y)`: int64 ids (samples, seq_len) of random words with one marker at a random place,
    and the marker's class (int64)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randint(MARKERS + 1, vocab, (samples, seq_len), generator=g)
    y = torch.randint(MARKERS, (samples,), generator=g)
    where = torch.randint(seq_len, (samples,), generator=g)
    X[torch.arange(samples), where] = y + 1
    return X, y


def make_job(samples: int = 4000, seq_len: int = 32, batch_size: int = 64) -> trainpilot.Job:
    vocab = 200
    X, y = make_tokens(samples, seq_len, vocab)
    return trainpilot.Job(
        lambda: TransformerClassifier(vocab, seq_len, num_classes=MARKERS),
        (X, y),  # token ids stay int64; int targets: cross-entropy is the default loss
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01),
        batch_size=batch_size,
        metric="accuracy",
        name="transformer-encoder",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a tiny run (400 samples, 1 epoch)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    samples, epochs = (400, 1) if args.small else (4000, args.epochs)

    job = make_job(samples=samples)
    report = trainpilot.plan(job, epochs=epochs)
    chosen = report.chosen
    print(f"plan: {chosen['label']}, predicted {chosen['predicted_s']:.2f} s, confidence {chosen['confidence']:.2f}")
    for line in report.reasoning:
        print("  ", line)

    result = trainpilot.fit(job, epochs=epochs)
    print(f"status: {result.status} ({result.message})")
    if not result.ok:
        raise SystemExit(1)
    print(f"predicted {result.predicted_s:.2f} s, actual {result.actual_s:.2f} s")
    print(f"validation accuracy: {result.to_dict()['val_accuracy']:.1%}")


if __name__ == "__main__":
    main()
