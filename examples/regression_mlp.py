"""Regression with an MLP: float targets, mean squared error, and your own metric (R²).

The network is a plain multilayer perceptron (Rumelhart, Hinton & Williams, 1986) with SiLU
activations. The data is a noisy smooth function of 8 features; a float target makes MSE the
default loss, written out here anyway. The metric is any `(output, target) -> float`: here the
coefficient of determination R², 1.0 for a perfect fit and 0.0 for predicting the mean.

    python examples/regression_mlp.py            # plan, then train 3 epochs
    python examples/regression_mlp.py --small    # a few seconds
    trainpilot headless run --job examples/regression_mlp.py:make_job
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import trainpilot

FEATURES = 8


def make_mlp(hidden: int = 128, depth: int = 3) -> nn.Module:
    layers: list[nn.Module] = []
    width = FEATURES
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.SiLU()]
        width = hidden
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def make_data(samples: int, noise: float = 0.1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`(X, y)`: X (samples, 8) uniform in [-2, 2], y (samples, 1) a smooth function of X plus noise."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(samples, FEATURES, generator=g) * 4 - 2
    y = (
        torch.sin(X[:, 0]) * torch.cos(X[:, 1])
        + 0.5 * X[:, 2] ** 2
        - X[:, 3] * X[:, 4]
        + torch.tanh(X[:, 5] + X[:, 6])
        + 0.3 * X[:, 7]
    )
    y = y + noise * torch.randn(samples, generator=g)
    return X, y.unsqueeze(1)  # (samples, 1): the same shape as the model's output


def r2(output: torch.Tensor, target: torch.Tensor) -> float:
    """R² of one batch: 1 - residual sum of squares / total sum of squares."""
    output, target = output.detach(), target.detach()  # training batches arrive with autograd attached
    residual = ((target - output) ** 2).sum()
    total = ((target - target.mean()) ** 2).sum().clamp_min(1e-12)
    return float(1 - residual / total)


def make_job(samples: int = 20000, batch_size: int = 128) -> trainpilot.Job:
    X, y = make_data(samples)
    return trainpilot.Job(
        make_mlp,
        (X, y),
        loss=nn.MSELoss(),
        optimizer=lambda params: torch.optim.Adam(params, lr=3e-3),
        scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),  # stepped per epoch
        batch_size=batch_size,
        metric=r2,
        name="regression-mlp",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a tiny run (1000 samples, 1 epoch)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    samples, epochs = (1000, 1) if args.small else (20000, args.epochs)

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
    out = result.to_dict()
    print(f"predicted {result.predicted_s:.2f} s, actual {result.actual_s:.2f} s")
    # a callable metric is reported under val_accuracy, whatever it measures; `metric` names it
    print(f"validation {out['metric']}: {out['val_accuracy']:.3f}, validation MSE: {out['val_loss']:.4f}")


if __name__ == "__main__":
    main()
