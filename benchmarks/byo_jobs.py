"""Five jobs that are not in TrainPilot's zoo, written after well-known public architectures, for
benchmarks/byo.py. Each `make_*()` returns a fresh `trainpilot.Job` (a model factory, so every
run starts from the same weights) on synthetic but learnable data.

- ResNet (He et al. 2015, the CIFAR variant): 3 stages of basic residual blocks, 32x32 RGB.
- MobileNet (Howard et al. 2017): depthwise-separable convolution blocks, 32x32 RGB.
- Transformer encoder (Vaswani et al. 2017) classifier on int64 token ids.
- A regression MLP with MSE on float targets.
- A small CNN on a Dataset whose items are augmented in numpy per item (pad + crop, flip, blur,
  normalise), as a torchvision transform pipeline would: loading costs about what compute does.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import trainpilot

# ---------------------------------------------------------------- images


def _images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """32x32 RGB: a class-specific pattern plus noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    patterns = torch.randn(10, 3, 32, 32, generator=g)
    return patterns[y] + 1.5 * torch.randn(n, 3, 32, 32, generator=g), y


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, widths: tuple[int, ...] = (16, 32, 64), blocks: int = 1, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            for b in range(blocks):
                layers.append(BasicBlock(cin, w, 2 if i and not b else 1))
                cin = w
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)).mean(dim=(2, 3)))


def separable(cin: int, cout: int, stride: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
        nn.BatchNorm2d(cin),
        nn.ReLU6(),
        nn.Conv2d(cin, cout, 1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU6(),
    )


class MobileNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        plan = ((32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1))
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6())
        self.blocks = nn.Sequential(*(separable(a, b, s) for a, b, s in plan))
        self.head = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


def make_resnet(samples: int = 1536) -> trainpilot.Job:
    return trainpilot.Job(ResNet, _images(samples, 1), metric="accuracy", name="byo-resnet")


def make_mobilenet(samples: int = 1024) -> trainpilot.Job:
    return trainpilot.Job(MobileNet, _images(samples, 2), metric="accuracy", name="byo-mobilenet")


# ---------------------------------------------------------------- tokens


class TokenTransformer(nn.Module):
    def __init__(self, vocab: int = 1000, d: int = 64, heads: int = 4, layers: int = 2, classes: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.position = nn.Parameter(torch.zeros(1, 64, d))
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.position[:, : tokens.shape[1]]
        return self.head(self.encoder(h).mean(dim=1))


def make_transformer(samples: int = 2048, seq: int = 32) -> trainpilot.Job:
    """Classify a sequence by which of four marker tokens (1..4) it holds."""
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(5, 1000, (samples, seq), generator=g)
    y = torch.randint(0, 4, (samples,), generator=g)
    tokens[torch.arange(samples), torch.randint(0, seq, (samples,), generator=g)] = y + 1
    return trainpilot.Job(TokenTransformer, (tokens, y), metric="accuracy", name="byo-transformer")


# ---------------------------------------------------------------- regression


def regression_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))


def make_regression(samples: int = 32768) -> trainpilot.Job:
    g = torch.Generator().manual_seed(4)
    X = torch.randn(samples, 16, generator=g)
    y = torch.sin(X[:, :4]).sum(dim=1) + 0.1 * torch.randn(samples, generator=g)
    return trainpilot.Job(regression_mlp, (X, y), name="byo-regression")


# ---------------------------------------------------------------- a Dataset that costs CPU per item


class AugmentedImages(torch.utils.data.Dataset):
    """32x32 RGB images kept as uint8 and augmented at every access, in numpy."""

    def __init__(self, n: int = 1536, seed: int = 5, blur: int = 3):
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, 10, n)
        base = rng.integers(0, 255, (10, 3, 32, 32))
        noisy = base[self.labels] + rng.integers(-40, 40, (n, 3, 32, 32))
        self.images = np.clip(noisy, 0, 255).astype(np.uint8)
        self.blur = blur

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng(i)
        img = np.pad(self.images[i].astype(np.float32) / 255.0, ((0, 0), (4, 4), (4, 4)), mode="reflect")
        dx, dy = rng.integers(0, 9, 2)
        img = img[:, dy : dy + 32, dx : dx + 32]
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        for _ in range(self.blur):
            img = (img + np.roll(img, 1, 1) + np.roll(img, -1, 1) + np.roll(img, 1, 2) + np.roll(img, -1, 2)) / 5.0
        img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(np.ascontiguousarray(img)), int(self.labels[i])


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 10),
    )


def make_augmented(samples: int = 1536) -> trainpilot.Job:
    return trainpilot.Job(small_cnn, AugmentedImages(samples), metric="accuracy", name="byo-augmented")


def make_cnn(samples: int = 4096) -> trainpilot.Job:
    """small_cnn on images in memory (no per-item work), batch 256 as hetero.py's: a CNN job with
    nothing batch-coupled whose steps are compute, for ranks.py's slowed rank and split (not one of
    byo.py's five)."""
    X, y = _images(samples, seed=7)
    return trainpilot.Job(small_cnn, (X, y), metric="accuracy", batch_size=256, name="byo-cnn")


JOBS = {
    "resnet": make_resnet,
    "mobilenet": make_mobilenet,
    "transformer": make_transformer,
    "regression": make_regression,
    "augmented": make_augmented,
}
