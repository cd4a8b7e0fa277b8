"""Non-negative least squares for the calibration fit (numpy only; scipy is not a dependency).

Every coefficient of the step-time model is a cost (seconds per step, per layer, per FLOP, per
byte), so none may be negative: a negative FLOP cost fitted to noise would predict that a bigger
model trains faster. Lawson-Hanson active-set NNLS, small and exact for the ~10x8 systems we fit.
"""

from __future__ import annotations

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """Minimise ||a x - b|| subject to x >= 0 (Lawson & Hanson, 1974, chapter 23)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * np.linalg.norm(a, 1) * max(m, n)
    max_iter = max_iter or 3 * n
    w = a.T @ (b - a @ x)
    for _ in range(max_iter):
        if passive.all() or not (w[~passive] > tol).any():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > tol).all():
                x = z
                break
            # Step back towards the old x until a passive coefficient hits zero, then drop it.
            mask = passive & (z <= tol)
            alpha = np.min(x[mask] / (x[mask] - z[mask]))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        w = a.T @ (b - a @ x)
    return x


def relative_nnls(
    rows: np.ndarray,
    seconds: np.ndarray,
    base: np.ndarray | None = None,
    robust: bool = True,
    huber: float = 0.2,
    iterations: int = 4,
) -> tuple[np.ndarray, float]:
    """Fit coefficients so that base + rows @ coef ~ seconds with *relative* errors weighted
    equally (a 1 ms step and a 100 ms step count the same), each column scaled to unit size for
    conditioning. `base` (default 0) is a known part of each time, e.g. the idle prediction when
    fitting what a busy core adds.

    `robust`: iteratively reweighted (Huber) — a point more than `huber` (relative) off the fit
    counts with weight huber/|residual|. Timings next to a busy core are heavy-tailed (a parallel
    region sometimes waits a whole scheduler slice), and one such point must not decide a
    coefficient for every prediction after it.
    Returns (coef, RMS relative error of the fit over all points, unweighted)."""
    rows = np.asarray(rows, dtype=float)
    seconds = np.asarray(seconds, dtype=float)
    base = np.zeros_like(seconds) if base is None else np.asarray(base, dtype=float)
    scaled_rows = rows / seconds[:, None]
    target = (seconds - base) / seconds
    scale = np.abs(scaled_rows).max(axis=0)
    scale[scale == 0] = 1.0
    weights = np.ones_like(seconds)
    coef = np.zeros(rows.shape[1])
    for _ in range(iterations if robust else 1):
        w = np.sqrt(weights)[:, None]
        coef = nnls(scaled_rows / scale * w, target * w[:, 0]) / scale
        rel = (base + rows @ coef) / seconds - 1.0
        weights = np.where(np.abs(rel) <= huber, 1.0, huber / np.maximum(np.abs(rel), 1e-12))
    rel = (base + rows @ coef) / seconds - 1.0
    return coef, float(np.sqrt(np.mean(rel**2)))
