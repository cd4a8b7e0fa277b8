"""Hardware samples for the Hardware panel, produced off the UI thread.

`live_samples` yields the machine's state every `interval` seconds (psutil, plus the accelerator
samplers the core provides where it has them). `stream_samples` is the body of the sampler thread
worker: it keeps the short history and posts one `UtilizationSampled` per sample. Tests hand it a
finite, scripted list of samples instead, so the screen is deterministic.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Iterable, Iterator

from trainpilot.machine.monitor import AcceleratorSampler, Monitor, UtilizationSample

from .messages import UtilizationSampled

HISTORY_LENGTH = 120  # two minutes at the default 1 Hz: more than the widest sparkline shows


def accelerator_samplers() -> list[AcceleratorSampler]:
    """The core's platform samplers (ANE / GPU power and utilisation) where that module exists."""
    try:
        from trainpilot.machine.samplers import default_samplers  # type: ignore[import-not-found]
    except ImportError:
        return []
    try:
        return list(default_samplers())
    except Exception:  # a broken platform probe must not take the screen down; readings say n/a
        return []


def live_samples(interval: float | Callable[[], float], stop: threading.Event) -> Iterator[UtilizationSample]:
    """One sample per `interval` until `stop` is set; a callable is asked before each wait (the
    app's pace follows the run's plan). The first comes after one interval: a CPU percentage needs
    two readings of the CPU times."""
    monitor = Monitor(accelerator_samplers())
    wait = interval if callable(interval) else (lambda: interval)
    while not stop.wait(wait()):
        yield monitor.sample()


def stream_samples(samples: Iterable[UtilizationSample], post: Callable[[UtilizationSampled], object], stop: threading.Event, history_length: int = HISTORY_LENGTH) -> None:
    history: deque[UtilizationSample] = deque(maxlen=history_length)
    for sample in samples:
        if stop.is_set():
            return
        history.append(sample)
        post(UtilizationSampled(sample, tuple(history)))
