"""What a run is asked to do (`SessionConfig`), checked in one place before anything starts."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from trainpilot.errors import ConfigError

DEFAULT_EPOCHS = 3
BACKEND_CHOICES = ("auto", "cpu", "ane", "mps", "cuda", "split")
ADAPT_CHOICES = ("on", "verify", "off")


@dataclass(frozen=True)
class SessionConfig:
    model: str | dict[str, Any] = "small_cnn"
    dataset: str | None = None  # None or "demo": the bundled demo set
    epochs: int | None = None  # None: DEFAULT_EPOCHS, or with `resume` the resumed run's own count
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    backend: str = "auto"  # auto | cpu | ane | mps | cuda | split
    threads: int | None = None
    compile: bool = False  # train a torch.compile'd model (a CPU plan setting, see backends/compiled.py)
    val_fraction: float = 0.1
    run_id: str | None = None
    resume: str | None = None  # run id (or checkpoint path) to resume
    record_history: bool = True
    freeze: int | None = None  # ANE frozen-backbone: how many leading layers run in Core ML
    objective: str = "time"  # what the agent minimises: time | energy | edp (energy/objective.py)
    job: str | None = None  # `file.py:make_job`: the user's own Job instead of `model` on `dataset`
    workers: int | None = None  # pin a job's DataLoader workers (None: the job's own, else the agent's choice)
    memory_format: str = "auto"  # auto | contiguous | channels_last (agent/step_settings.py)
    precision: str = "fp32"  # fp32 | auto | bf16 | fp16: mixed precision changes numerics, so only when asked
    adapt: str = "on"  # on | verify | off: the closed loop (run/closed_loop.py) re-plans mid-run, verifies near ties

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate_config(config: SessionConfig) -> SessionConfig:
    """`config` if it can start, else a ConfigError naming the option (the CLI says it as a usage
    error). Only what needs no model, data or hardware is checked here."""
    from trainpilot.energy.objective import check_objective

    try:
        check_objective(config.objective)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if config.backend not in BACKEND_CHOICES:
        raise ConfigError(f"--backend must be one of {', '.join(BACKEND_CHOICES)}, got '{config.backend}'")
    if config.adapt not in ADAPT_CHOICES:
        raise ConfigError(f"--adapt must be one of {', '.join(ADAPT_CHOICES)}, got '{config.adapt}'")
    if config.epochs is not None and config.epochs < 1:
        raise ConfigError("--epochs must be at least 1")
    if config.batch_size < 1:
        raise ConfigError("--batch-size must be at least 1")
    if not config.lr > 0:
        raise ConfigError("--lr must be positive")
    if config.freeze is not None and config.freeze < 1:
        raise ConfigError("--freeze must be at least 1 (the number of leading layers Core ML runs frozen)")
    if config.workers is not None and config.workers < 0:
        raise ConfigError("--workers must be 0 or more (0: batches are loaded in the training process)")
    from trainpilot.agent.step_settings import check_choices

    check_choices(config.memory_format, config.precision)
    if config.threads is not None and config.threads < 1:
        raise ConfigError("--threads must be at least 1")
    if config.compile and config.backend not in ("auto", "cpu"):
        raise ConfigError(
            "--compile is a CPU plan setting (torch.compile on the host);"
            f" it does not go with --backend {config.backend}"
        )
    return config


def with_default_epochs(config: SessionConfig) -> SessionConfig:
    """`config` with DEFAULT_EPOCHS when it names none (a resumed run keeps its own count instead)."""
    if config.epochs is None and not config.resume:
        return replace(config, epochs=DEFAULT_EPOCHS)
    return config


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
