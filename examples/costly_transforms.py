"""A Dataset whose items cost CPU time: decode and augment per item, so DataLoader workers matter.

Each image is stored compressed (as files on disk would be) and every `__getitem__` decodes it,
takes a random 32x32 crop, flips it at random, jitters brightness and contrast and blurs it with a
5x5 Gaussian in numpy. The model is LeNet-5 (LeCun et al., 1998) for 3x32x32 inputs, which trains
in far less time than the loading takes: the agent times a few batches of loading and plans the
DataLoader workers together with the training threads (see "loader workers" in the plan).

The Dataset class sits at module level so it pickles: worker processes receive it that way.

    python examples/costly_transforms.py            # plan, then train 3 epochs
    python examples/costly_transforms.py --small    # a few seconds
    trainpilot headless run --job examples/costly_transforms.py:make_job
"""

from __future__ import annotations

import argparse
import zlib

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

import trainpilot

CLASSES = ("horizontal stripes", "vertical stripes", "checkerboard", "rings")  # all unchanged by a flip
GAUSS5 = np.array([1, 4, 6, 4, 1], dtype=np.float32) / 16


def render(label: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """One (size, size, 3) uint8 image of class `label`: a pattern of random period, phase and tint, plus noise."""
    yy, xx = np.mgrid[:size, :size].astype(np.float32)
    period, phase = rng.uniform(5, 9), rng.uniform(0, 2 * np.pi)
    wave = {
        0: np.sin(2 * np.pi * yy / period + phase),
        1: np.sin(2 * np.pi * xx / period + phase),
        2: np.sin(2 * np.pi * yy / period + phase) * np.sin(2 * np.pi * xx / period + phase),
        3: np.sin(2 * np.pi * np.hypot(yy - size / 2, xx - size / 2) / period + phase),
    }[label]
    tint = rng.uniform(0.3, 1.0, size=3)
    image = 0.5 + 0.35 * wave[..., None] * tint + rng.normal(0, 0.15, (size, size, 3))
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


def blur(image: np.ndarray) -> np.ndarray:
    """A separable 5x5 Gaussian blur of an (H, W, C) image, edges reflected."""
    padded = np.pad(image, ((2, 2), (2, 2), (0, 0)), mode="reflect")
    h, w = image.shape[:2]
    rows = sum(k * padded[i : i + h] for i, k in enumerate(GAUSS5))
    return sum(k * rows[:, i : i + w] for i, k in enumerate(GAUSS5))


class EncodedImages(Dataset):
    """Compressed images, decoded and augmented on every access (`blur_passes` scales the cost)."""

    def __init__(self, samples: int, size: int = 40, crop: int = 32, blur_passes: int = 3, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.size, self.crop, self.blur_passes = size, crop, blur_passes
        self.labels = rng.integers(len(CLASSES), size=samples)
        self.encoded = [zlib.compress(render(int(c), size, rng).tobytes()) for c in self.labels]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng()  # fresh entropy per item, so each worker augments differently
        image = np.frombuffer(zlib.decompress(self.encoded[i]), np.uint8).reshape(self.size, self.size, 3)
        top, left = rng.integers(0, self.size - self.crop + 1, size=2)
        image = image[top : top + self.crop, left : left + self.crop].astype(np.float32) / 255
        if rng.random() < 0.5:
            image = image[:, ::-1]
        image = (image - image.mean()) * rng.uniform(0.8, 1.2) + image.mean() + rng.uniform(-0.1, 0.1)
        for _ in range(self.blur_passes):
            image = blur(image)
        image = (image - 0.5) / 0.25
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), int(self.labels[i])


class LeNet5(nn.Module):
    def __init__(self, num_classes: int = len(CLASSES)):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def make_job(samples: int = 3000, blur_passes: int = 3, batch_size: int = 64) -> trainpilot.Job:
    # workers=None (the default): the agent picks the DataLoader's worker count; workers=2 would pin it
    return trainpilot.Job(
        LeNet5, EncodedImages(samples, blur_passes=blur_passes), batch_size=batch_size, metric="accuracy", name="lenet5"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a tiny run (300 samples, 1 epoch)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    samples, epochs = (300, 1) if args.small else (3000, args.epochs)

    job = make_job(samples=samples)
    report = trainpilot.plan(job, epochs=epochs)
    chosen = report.chosen
    print(f"plan: {chosen['label']}, predicted {chosen['predicted_s']:.2f} s, confidence {chosen['confidence']:.2f}")
    for line in report.trace:  # every plan with its predicted time, loading included
        print("  ", line)

    result = trainpilot.fit(job, epochs=epochs)
    print(f"status: {result.status} ({result.message})")
    if not result.ok:
        raise SystemExit(1)
    print(f"predicted {result.predicted_s:.2f} s, actual {result.actual_s:.2f} s")
    print(f"validation accuracy: {result.to_dict()['val_accuracy']:.1%}")


if __name__ == "__main__":
    main()
