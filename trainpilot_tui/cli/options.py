"""The options `run`, `plan`, `compress` and the app share: their help texts, and the one place a
run's options become a validated SessionConfig."""
from __future__ import annotations

from typing import Any, Optional

from .common import usage_error

MODEL_HELP = (
    "Model: small_cnn (the default), wide_cnn, large_dense, rnn, mlp, or path/to/file.py:ClassName (an nn.Module"
    " whose constructor takes no arguments). A model file is Python code and runs with your rights, like"
    " `python file.py`."
)
JOB_HELP = (
    "Your own job instead of --model/--dataset: FILE.py:FUNCTION, where FUNCTION() takes no arguments and returns a"
    " trainpilot.Job (your model, your data, and a loss or step, an optimizer, a metric), e.g."
    " `def make_job(): return trainpilot.Job(Net(), (X, y), metric=\"accuracy\")`."
    " The file is Python code and runs with your rights, like `python FILE.py`."
)
WORKERS_HELP = (
    "Pin the DataLoader worker count of a --job whose data is a Dataset (0: batches are loaded in the training"
    " process). Default: the agent chooses it with the threads, predicting each pair."
)
OBJECTIVE_HELP = (
    "What the agent minimises: time (seconds), energy (joules: measured by RAPL/NVML where the machine allows,"
    " else estimated and labelled est.) or edp (energy x delay)."
)
MEMORY_FORMAT_HELP = (
    "Tensor layout for convolutional models: auto lets the agent weigh channels_last (NHWC) against contiguous"
    " (NCHW) by prediction; the math is the same either way."
)
PRECISION_HELP = (
    "fp32 keeps PyTorch's numerics; auto lets the agent weigh bf16/fp16 autocast where the hardware runs it"
    " natively (CUDA tensor cores, Apple GPUs, CPUs with AVX512-BF16/AMX); bf16/fp16 ask for it, refused where"
    " nothing runs it natively."
)
ADAPT_HELP = (
    "The closed loop: on (default) the agent keeps deciding while the run trains: it moves the run when the"
    " machine's load or the steps' pace changes for good and a move pays, and settles a near tie between two"
    " plans on the run's own steps; verify settles near ties only; off keeps the one decision made before the"
    " first step. An override pins the plan (docs/adaptation.md)."
)
DATASET_HELP = (
    "Dataset: a directory with X_train.npy/y_train.npy (or X.npy/y.npy) or MNIST-style IDX files (.gz ok),"
    " a .npz with X/y, or a .csv whose last column is the label. Default: the bundled demo set."
)


DEFAULT_MODEL = "small_cnn"
DEFAULT_BATCH_SIZE = 64


def check_job_options(job: Optional[str], **others: Any) -> None:
    """--job names the model and the data itself: with any of `others` given (not None) it is a
    usage error naming both options. `others` are keyword names as the options are spelt
    (`model`, `layers`, `batch_size`: --model, --layers, --batch-size)."""
    if job is None:
        return
    given = [f"--{name.replace('_', '-')}" for name, value in others.items() if value is not None]
    if given:
        own = given[0] == "--batch-size"
        why = " (the job sets its own: Job(batch_size=...))" if own else " (the job gives the model and the data)"
        usage_error(f"--job does not go with {given[0]}{why}")


def check_step_settings(memory_format: str, precision: str) -> None:
    """--memory-format and --precision as the core's validation checks them (run/config.py), for a
    command that builds no SessionConfig (`plan`): a bad value is a usage error."""
    from trainpilot.agent.step_settings import MEMORY_FORMAT_CHOICES, PRECISION_CHOICES

    options = (("--memory-format", memory_format, MEMORY_FORMAT_CHOICES), ("--precision", precision, PRECISION_CHOICES))
    for flag, value, choices in options:
        if value not in choices:
            usage_error(f"{flag} must be one of {', '.join(choices)}, got '{value}'")


def session_config(
    *, model: Optional[str], dataset: Optional[str], epochs: Optional[int], batch_size: Optional[int], lr: float, seed: int, backend: str, threads: Optional[int], resume: Optional[str] = None, layers: Optional[int] = None, freeze: Optional[int] = None,
    compile: bool = False, objective: str = "time",
    job: Optional[str] = None,
    workers: Optional[int] = None,
    memory_format: str = "auto", precision: str = "fp32",
    adapt: str = "on",
) -> Any:
    """The options as a SessionConfig, checked by the core's own validation (run/config.py); a bad
    option is a usage error (exit 2). `model`/`batch_size` None: their defaults (None lets --job
    tell a given --model from the default)."""
    from trainpilot.errors import ConfigError
    from trainpilot.run.config import SessionConfig, validate_config, with_default_epochs

    check_job_options(job, model=model, dataset=dataset, layers=layers, batch_size=batch_size)
    if workers is not None and not job:
        usage_error("--workers goes with --job (zoo data is in memory and loaded without workers)")
    name = model or DEFAULT_MODEL
    # a job's run is named by the job; the session loads it (in the app: in the training process)
    model_config: Any = job if job else {"name": name, "layers": layers} if layers else name
    batch = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    config = SessionConfig(model=model_config, dataset=dataset, epochs=epochs, batch_size=batch, lr=lr, seed=seed,
                           backend=backend, threads=threads, resume=resume, freeze=freeze, compile=compile,
                           objective=objective, job=job, workers=workers, memory_format=memory_format,
                           precision=precision, adapt=adapt)
    try:
        validate_config(config)
    except ConfigError as exc:
        usage_error(str(exc))
    return with_default_epochs(config)  # None only on --resume: train to the resumed run's own count
