"""TrainingEnvironment: the seed API's training environment over in-memory arrays.

    TrainingEnvironment(X_train, y_train, model_config).execute_training(backend, workload_profile)

returns {status, backend, execution_time, message, ...training metrics}. It runs a real session
(the same one the CLI and TUI run) on the given arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainpilot.errors import TrainPilotError
from trainpilot.job.data import validate


class TrainingEnvironment:
    def __init__(
        self,
        X_train: Any,
        y_train: Any,
        model_config: dict[str, Any] | str,
        *,
        epochs: int = 1,
        batch_size: int = 32,
        lr: float = 1e-3,
        seed: int = 0,
    ):
        self.dataset = validate(np.asarray(X_train, dtype=np.float32), np.asarray(y_train), "arrays")
        self.model_config = model_config
        self.epochs, self.batch_size, self.lr, self.seed = epochs, batch_size, lr, seed

    def execute_training(
        self, backend: str, workload_profile: dict[str, Any] | None = None, plan: Any = None
    ) -> dict[str, Any]:
        from trainpilot.run.session import SessionConfig, TrainingSession

        config = SessionConfig(
            model=self.model_config,
            dataset="arrays",
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            seed=self.seed,
            backend=backend,
            threads=getattr(plan, "threads", None),
            val_fraction=0.1,
        )
        session = TrainingSession(config, dataset=self.dataset)
        try:
            for _event in session.events():
                pass
        except TrainPilotError as exc:  # never crash the caller: report
            return {"status": "failed", "backend": backend, "execution_time": 0.0, "message": str(exc)}
        assert session.finished is not None
        result = dict(session.finished.result)
        result["requested_backend"] = backend
        if result.get("fallback_reason"):
            result["message"] = (
                f"{backend} unavailable, trained on the CPU instead ({result['fallback_reason']}): {result['message']}"
            )
        return result
