"""The options `run`, `plan`, `compress` and the app share: their help texts, and the one place a
run's options become a validated SessionConfig."""
from __future__ import annotations

from typing import Any, Optional

from trainpilot.run.session import DEFAULT_EPOCHS  # light: the session module imports torch lazily

from .common import BACKEND_CHOICES, usage_error

MODEL_HELP = (
    "Model: small_cnn, wide_cnn, large_dense, rnn, mlp, or path/to/file.py:ClassName (an nn.Module whose constructor takes no arguments"
    "). A model file is Python code and runs with your rights, like `python file.py`."
)
OBJECTIVE_HELP = (
    "What the agent minimises: time (seconds), energy (joules: measured by RAPL/NVML where the machine allows,"
    " else estimated and labelled est.) or edp (energy x delay)."
)
DATASET_HELP = (
    "Dataset: a directory with X_train.npy/y_train.npy (or X.npy/y.npy) or MNIST-style IDX files (.gz ok),"
    " a .npz with X/y, or a .csv whose last column is the label. Default: the bundled demo set."
)


def session_config(
    *, model: str, dataset: Optional[str], epochs: Optional[int], batch_size: int, lr: float, seed: int, backend: str, threads: Optional[int], resume: Optional[str] = None, layers: Optional[int] = None, freeze: Optional[int] = None,
    compile: bool = False, objective: str = "time",
) -> Any:
    from trainpilot.energy.objective import check_objective
    from trainpilot.run.session import SessionConfig

    try:
        check_objective(objective)
    except ValueError as exc:
        usage_error(str(exc))

    if backend not in BACKEND_CHOICES:
        usage_error(f"--backend must be one of {', '.join(BACKEND_CHOICES)}, got '{backend}'")
    if epochs is not None and epochs < 1:
        usage_error("--epochs must be at least 1")
    if epochs is None and not resume:
        epochs = DEFAULT_EPOCHS  # None only on --resume: train to the resumed run's own count
    if batch_size < 1:
        usage_error("--batch-size must be at least 1")
    if not lr > 0:
        usage_error("--lr must be positive")
    if freeze is not None and freeze < 1:
        usage_error("--freeze must be at least 1 (the number of leading layers Core ML runs frozen)")
    if threads is not None and threads < 1:
        usage_error("--threads must be at least 1")
    if compile and backend not in ("auto", "cpu"):
        usage_error(f"--compile is a CPU plan setting (torch.compile on the host); it does not go with --backend {backend}")
    model_config: Any = {"name": model, "layers": layers} if layers else model
    return SessionConfig(model=model_config, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, resume=resume, freeze=freeze, compile=compile, objective=objective)
