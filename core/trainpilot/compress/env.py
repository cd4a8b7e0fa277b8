"""The compression search as a gymnasium environment, one episode per configuration.

Each step is one prunable layer, in forward order: the observation is that layer's embedding
(`layers.embed`, which includes the previous layer's action), the action its sparsity. After the
last layer the whole configuration is tried for real (`evaluate.Evaluator`: prune, short fine-tune,
held-out accuracy, cycles) and the episode ends with that reward; earlier steps give 0.

Actions are in [-1, 1] (what stable-baselines3's continuous agents expect) and map linearly to a
sparsity in [0, max_sparsity].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from trainpilot.compress.evaluate import Evaluation
from trainpilot.compress.layers import EMBEDDING_SIZE, ModelLayers, embed

DEFAULT_MAX_SPARSITY = 0.8


class CompressionEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(
        self,
        layers: ModelLayers,
        evaluate: Callable[[dict[str, float]], Evaluation],
        *,
        max_sparsity: float = DEFAULT_MAX_SPARSITY,
        on_episode: Callable[[int, Evaluation], None] | None = None,
    ):
        super().__init__()
        if not layers.prunable:
            raise ValueError("a model with no prunable layer has nothing to search")
        if not 0.0 < max_sparsity < 1.0:
            raise ValueError(f"max_sparsity must be in (0, 1), got {max_sparsity}")
        self.layers = layers
        self.evaluate = evaluate
        self.max_sparsity = max_sparsity
        self.on_episode = on_episode
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(EMBEDDING_SIZE,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.history: list[Evaluation] = []
        self._position = 0
        self._actions: list[float] = []

    @property
    def at_episode_start(self) -> bool:
        """No layer of an episode chosen yet (the last episode, if any, is over)."""
        return self._position == 0 or self._position >= self.n_layers

    @property
    def n_layers(self) -> int:
        return len(self.layers.prunable)

    def sparsity_of(self, action: Any) -> float:
        a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        return (a + 1.0) / 2.0 * self.max_sparsity

    def _obs(self) -> np.ndarray:
        position = min(self._position, self.n_layers - 1)
        previous = self._actions[position - 1] / self.max_sparsity if position > 0 and self._actions else 0.0
        return np.asarray(embed(self.layers, position, previous), dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._position, self._actions = 0, []
        return self._obs(), {"layer": self.layers.prunable[0].name}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._position >= self.n_layers:
            raise RuntimeError("the episode is over: call reset()")
        self._actions.append(self.sparsity_of(action))
        self._position += 1
        if self._position < self.n_layers:
            return self._obs(), 0.0, False, False, {"layer": self.layers.prunable[self._position].name}
        sparsity = {layer.name: s for layer, s in zip(self.layers.prunable, self._actions, strict=False)}
        evaluation = self.evaluate(sparsity)
        self.history.append(evaluation)
        if self.on_episode is not None:
            self.on_episode(len(self.history), evaluation)
        return self._obs(), float(evaluation.reward.value), True, False, {"evaluation": evaluation}
