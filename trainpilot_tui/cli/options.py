"""The options `run`, `plan`, `compress` and the app share: their help texts, and the one place a
run's options become a validated SessionConfig."""
from __future__ import annotations

from typing import Any, Optional

from .common import usage_error

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
    """The options as a SessionConfig, checked by the core's own validation (run/config.py); a bad
    option is a usage error (exit 2)."""
    from trainpilot.errors import ConfigError
    from trainpilot.run.config import SessionConfig, validate_config, with_default_epochs

    model_config: Any = {"name": model, "layers": layers} if layers else model
    config = SessionConfig(model=model_config, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, resume=resume, freeze=freeze, compile=compile, objective=objective)
    try:
        validate_config(config)
    except ConfigError as exc:
        usage_error(str(exc))
    return with_default_epochs(config)  # None only on --resume: train to the resumed run's own count
