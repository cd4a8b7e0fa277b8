"""A ResNet-style CNN on 32x32 images: your own model and `(X, y)` tensors, with accuracy.

The network follows "Deep Residual Learning for Image Recognition" (He et al., 2015) in its
CIFAR form: a 3x3 stem, three stages of basic residual blocks (16, 32, 64 channels, each stage
halving the resolution), global average pooling and one linear layer. The images are synthetic
but learnable: each class is a smooth colour pattern, shifted at random and buried in noise.

    python examples/cnn_images.py            # plan, then train 3 epochs
    python examples/cnn_images.py --small    # a few seconds
    trainpilot headless run --job examples/cnn_images.py:make_job
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import trainpilot


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and a shortcut; a 1x1 convolution when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet for 32x32 inputs; `blocks` per stage (1 gives ResNet-8, 3 gives ResNet-20)."""

    def __init__(self, num_classes: int = 10, blocks: int = 1, width: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, c_in = [], width
        for stage, c_out in enumerate((width, 2 * width, 4 * width)):
            for i in range(blocks):
                layers.append(BasicBlock(c_in, c_out, stride=2 if stage > 0 and i == 0 else 1))
                c_in = c_out
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


def make_images(samples: int, num_classes: int = 10, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`(X, y)`: float32 images (samples, 3, 32, 32) and int64 labels. Each class has one smooth
    pattern (an 8x8 random field upsampled); a sample is its class's pattern, rolled by up to 4
    pixels, plus Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(num_classes, 3, 8, 8, generator=g)
    patterns = nn.functional.interpolate(coarse, size=32, mode="bilinear", align_corners=False)
    y = torch.randint(num_classes, (samples,), generator=g)
    X = patterns[y]
    shifts = torch.randint(-4, 5, (samples, 2), generator=g)
    for i, (dy, dx) in enumerate(shifts.tolist()):
        X[i] = torch.roll(X[i], shifts=(dy, dx), dims=(1, 2))
    X = X + 1.5 * torch.randn(X.shape, generator=g)
    return X, y


def make_job(samples: int = 4000, blocks: int = 1, batch_size: int = 64) -> trainpilot.Job:
    X, y = make_images(samples)
    return trainpilot.Job(
        lambda: ResNet(num_classes=10, blocks=blocks),  # a factory: every fit starts from fresh weights
        (X, y),  # int64 targets: cross-entropy is the default loss
        optimizer=lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4),
        batch_size=batch_size,
        metric="accuracy",
        name=f"resnet{6 * blocks + 2}",
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
