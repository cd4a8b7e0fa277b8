"""The one prepare step every consumer of a job shares: resolve the data, hold out the validation
split, build the model and profile it on one real batch — as a run will train it — and measure
what loading a batch costs."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trainpilot.errors import JobError, describe_exception
from trainpilot.job.batches import measure_loading, resolve_data
from trainpilot.job.objective import Objective, describe_batch, resolve_objective
from trainpilot.job.spec import Job, zoo_job
from trainpilot.job.workload import WorkloadProfile

PROFILE_SAMPLES = 2  # the profile's real batch: enough for BatchNorm, cheap for any model


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))


@contextlib.contextmanager
def random_state_kept() -> Iterator[None]:
    """torch's and numpy's random state as they were before the block: for work that draws from
    them (probing, planning) and must not move a run's, or a caller's, seeded draws."""
    import torch

    state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            np.random.set_state(state)


def usable_cpus() -> int:
    """The cores this process may run on (machine/probe.py has the same answer; that layer is not
    this one's to import)."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def optimizer_factory(job: Job) -> Any:
    """`params -> optimizer`: the job's own, else the Adam TrainPilot trains with."""
    import torch

    return job.optimizer or (lambda params: torch.optim.Adam(params, lr=1e-3))


@dataclass(frozen=True)
class PreparedJob:
    job: Job
    dataset: Any  # all of `data` (a data.Dataset, TensorPairs or MapData)
    train_set: Any
    val_set: Any
    profile: WorkloadProfile  # counts the training split only: what the run's steps go through
    objective: Objective
    seed: int
    batch_size: int
    shuffle: bool = True

    @property
    def name(self) -> str:
        return self.profile.model

    @property
    def source(self) -> str:
        return str(getattr(self.dataset, "source", "data"))

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must match to be resumed on this data."""
        shape = getattr(self.dataset, "sample_shape", None)
        return {
            "samples": len(self.dataset),
            "sample_shape": list(shape if shape is not None else self.profile.input_shape),
            "num_classes": int(getattr(self.dataset, "num_classes", 0) or self.profile.num_classes),
        }

    def fresh_model(self) -> Any:
        """The model as the run starts it. A zoo model or a factory's is built right after seeding,
        so every run of the same seed starts from the same weights; a module given as such is the
        user's own object, trained in place."""
        from torch import nn

        seed_everything(self.seed)
        if isinstance(self.job.model, nn.Module):
            return self.job.model
        return build_from(self.job)


def build_from(job: Job) -> Any:
    from torch import nn

    if job.zoo is not None:
        return job.model()
    try:
        model = job.model()
    except JobError:
        raise
    except Exception as exc:
        raise JobError(f"{job.title}: the model factory failed: {describe_exception(exc)}") from exc
    if not isinstance(model, nn.Module):
        raise JobError(f"{job.title}: the model factory returned {type(model).__name__}, not a torch.nn.Module")
    return model


def prepare(
    job: Job,
    *,
    epochs: int,
    val_fraction: float = 0.1,
    seed: int = 0,
    meter: Any = None,
    precisions: tuple[str, ...] = (),
    memory_format: str = "auto",
) -> PreparedJob:
    """Resolve, split and profile `job` for a run of `epochs` epochs. `meter`: a context manager
    factory whose `.result.cores` says what other processes used meanwhile (machine/contention.py's
    ExternalCpuMeter): with it, the job's step is also probed on every core when the machine is quiet.
    `precisions`: the mixed precisions this CPU runs natively that the run may use; the job's
    step is probed in them (and in channels_last, for a convolutional job, unless `memory_format`
    is "contiguous") beside fp32 NCHW."""
    from torch import nn

    data, taken = resolve_data(job.data, collate_fn=job.collate_fn)
    batch_size = int(taken.get("batch_size", job.batch_size))
    if len(data) == 0:
        raise JobError(f"{job.title}: the data set is empty")
    if job.val_data is not None:
        train_set, _ = data, None
        val_set, _ = resolve_data(job.val_data, collate_fn=job.collate_fn, what="val_data")
    else:
        train_set, val_set = data.split(val_fraction, seed)
    if len(train_set) == 0:
        raise JobError(f"{job.title}: no samples are left to train on after holding out the validation split")
    seed_everything(seed)
    if job.zoo is not None:
        profile, probe = _zoo_profile(job, data, train_set, batch_size, epochs)
        objective = resolve_objective(job, train_set.batch(np.arange(min(2, len(train_set)))))
    else:
        try:
            batch = train_set.batch(np.arange(min(PROFILE_SAMPLES, len(train_set))))
        except Exception as exc:
            raise JobError(f"{job.title}: loading the first samples failed: {describe_exception(exc)}") from exc
        model = job.model if isinstance(job.model, nn.Module) else build_from(job)
        objective = resolve_objective(job, batch, model)  # the model's forward says whether it takes the target
        # a copy: the profile's pass moves BatchNorm statistics, which the user's model must not see
        probe = copy.deepcopy(model) if model is job.model else model
        from trainpilot.job.profile_job import profile_job

        profile = profile_job(
            probe, batch, objective, name=job.title, dataset_size=len(train_set), batch_size=batch_size, epochs=epochs
        )
        _check_val(job, val_set, objective, batch)
    full = train_set.batch(np.arange(min(batch_size, len(train_set))))  # what the probes step on
    if job.zoo is None:
        probes = _probe(job, probe, full, objective, meter)
        form = "step" if job.step is not None else "loss"
        profile = replace(profile, extra={**profile.extra, "job_form": form, **probes})
    settings = _probe_settings(job, probe, full, objective, precisions, memory_format)
    profile = replace(profile, extra={**profile.extra, **settings})
    profile = replace(profile, **_loading(job, train_set, batch_size))
    return PreparedJob(job, data, train_set, val_set, profile, objective, seed, batch_size, taken.get("shuffle", True))


QUIET_CORES = 0.3  # other processes' CPU below which an all-core probe measures the job, not the load


def _probe(job: Job, model: Any, batch: Any, objective: Objective, meter: Any) -> dict[str, Any]:
    """One full batch's training step timed on one thread (`probe_step_s`) and, on a quiet machine,
    on every core (`probe_all_s` at `probe_threads`): job/step_probe.py."""
    from trainpilot.job.step_probe import probe_step

    make, cores = optimizer_factory(job), usable_cpus()
    try:
        out: dict[str, Any] = {"probe_step_s": probe_step(model, batch, objective, make)}
        if meter is not None and cores > 1:
            with meter() as watched:
                all_s = probe_step(model, batch, objective, make, threads=cores)
            if watched.result.cores < QUIET_CORES:
                out.update(probe_all_s=all_s, probe_threads=cores)
        return out
    except Exception as exc:
        raise JobError(f"{job.title}: a training step on a full batch failed: {describe_exception(exc)}") from exc


def _probe_settings(
    job: Job,
    model: Any,
    batch: Any,
    objective: Objective,
    precisions: tuple[str, ...],
    memory_format: str,
) -> dict[str, Any]:
    """The job's step in channels_last (a convolutional job) and in each of `precisions`, timed
    against fp32 NCHW on one thread and on every core (step_probe.probe_settings):
    extra["settings_probe"] = {threads: {variant: ratio}}, extra["channels_last_applies"]."""
    from trainpilot.job.layout import layout_applies
    from trainpilot.job.step_probe import probe_settings
    from trainpilot.plans import CHANNELS_LAST

    layout = layout_applies(model, batch)
    layouts: list[str | None] = [None, CHANNELS_LAST] if layout and memory_format != "contiguous" else [None]
    variants = [(fmt, p) for p in (None, *precisions) for fmt in layouts if fmt or p]
    if not variants:
        return {"channels_last_applies": layout}
    make = optimizer_factory(job)
    try:
        with random_state_kept():  # probing must not move the run's seeded draws
            found = {
                str(t): probe_settings(model, batch, objective, make, variants, t) for t in sorted({1, usable_cpus()})
            }
    except Exception as exc:  # the default step works (profiled above): only the variants are lost
        return {"channels_last_applies": layout, "settings_error": describe_exception(exc)}
    return {"channels_last_applies": layout, "settings_probe": found}


def _zoo_profile(job: Job, data: Any, train_set: Any, batch_size: int, epochs: int) -> tuple[WorkloadProfile, Any]:
    """The zoo model's profile, and the model it was taken on (the settings probe trains copies)."""
    from trainpilot.job.models import build_model
    from trainpilot.job.workload import profile_model

    module = build_model(job.zoo, data.sample_shape, data.num_classes)
    return profile_model(
        module,
        data.sample_shape,
        data.num_classes,
        len(train_set),
        name=job.zoo.name,
        batch_size=batch_size,
        epochs=epochs,
    ), module


def _check_val(job: Job, val_set: Any, objective: Objective, train_batch: Any) -> None:
    """Validation batches must have the training batches' structure (a val set of another form fails
    at the end of the first epoch otherwise, after the user waited for it)."""
    if len(val_set) == 0:
        return
    try:
        val_batch = val_set.batch(np.arange(min(PROFILE_SAMPLES, len(val_set))))
    except Exception as exc:
        raise JobError(f"{job.title}: loading the first validation samples failed: {describe_exception(exc)}") from exc
    if describe_batch(_shape_free(val_batch)) != describe_batch(_shape_free(train_batch)):
        raise JobError(
            f"{job.title}: validation batches {describe_batch(val_batch)} do not look like training batches"
            f" {describe_batch(train_batch)}"
        )


def _shape_free(batch: Any) -> Any:
    """A batch's structure and dtypes without its sizes (validation may differ in length, not kind)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return torch.empty(0, dtype=batch.dtype)
    if isinstance(batch, dict):
        return {k: _shape_free(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_shape_free(v) for v in batch) if not hasattr(batch, "_fields") else tuple(batch)
    return batch


def _loading(job: Job, train_set: Any, batch_size: int) -> dict[str, Any]:
    """The profile's data-pipeline fields: the loading cost and who may load."""
    import multiprocessing

    load_s = measure_loading(train_set, batch_size)
    start = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()
    fields = _loader_fields(job, train_set, load_s)
    return {**fields, "loader_start": "fork" if start == "fork" else "spawn"}


def _loader_fields(job: Job, train_set: Any, load_s: float) -> dict[str, Any]:
    if job.workers is not None:
        return {"load_s_per_batch": load_s, "loader": "pinned", "pinned_workers": job.workers}
    if getattr(train_set, "in_memory", True):
        return {"load_s_per_batch": load_s, "loader": "memory"}
    reason = train_set.workers_unavailable()
    if reason:
        return {"load_s_per_batch": load_s, "loader": "in-process", "loader_note": reason}
    return {"load_s_per_batch": load_s, "loader": "workers"}


def prepare_job(
    model: str | dict[str, Any],
    dataset: Any,
    *,
    epochs: int,
    batch_size: int,
    val_fraction: float = 0.1,
    seed: int = 0,
    precisions: tuple[str, ...] = (),
    memory_format: str = "auto",
) -> PreparedJob:
    """A zoo model (or `path.py:Class`) on `dataset`: a path, None or "demo" for the bundled set, or
    a loaded `data.Dataset`."""
    from trainpilot.job.data import Dataset, resolve_dataset
    from trainpilot.job.models import ModelSpec

    spec = ModelSpec.from_config(model)
    data = dataset if isinstance(dataset, Dataset) else resolve_dataset(dataset)
    return prepare(
        zoo_job(spec, data, batch_size=batch_size),
        epochs=epochs,
        val_fraction=val_fraction,
        seed=seed,
        precisions=precisions,
        memory_format=memory_format,
    )
