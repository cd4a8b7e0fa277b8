"""The layer generator's policy: TD3 from stable-baselines3 over `env.CompressionEnv`.

Why TD3: AMC (ECCV 2018), the method's closest published relative, uses DDPG for per-layer ratios;
TD3 is DDPG with the two fixes that matter when every reward is expensive and noisy (clipped double
Q-learning against over-estimation, delayed policy updates), and stable-baselines3 keeps it
maintained and tested. As in AMC, the first episodes explore at random (TD3's `learning_starts`)
and rewards are not discounted within an episode (the only reward comes after the last layer).

The search returns every configuration it tried; `best` picks the one to deploy.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from trainpilot.compress.env import CompressionEnv
from trainpilot.compress.evaluate import Evaluation
from trainpilot.compress.speed_margin import DEFAULT_AIM

# A search with time left may run past its episodes, up to this many times as many: on a cheap model
# an episode costs well under a second (small_cnn / digits against wide_cnn / demo:
# docs/measurements.md#cited-in-the-code-compression), and its 2-layer space had been sampled at only
# a handful of distinct fast configurations.
MAX_EPISODES_FACTOR = 4


def warmup_episodes(episodes: int) -> int:
    """Random episodes before the policy learns: a third, at least 2 (AMC explores first too)."""
    return min(episodes, max(2, episodes // 3))


def run_search(
    env: CompressionEnv, episodes: int, *, seed: int = 0, stop: threading.Event | None = None, budget_s: float = 0.0
) -> list[Evaluation]:
    """Train TD3 for `episodes` episodes on `env`, then for more (up to MAX_EPISODES_FACTOR x) while
    the search has taken less than `budget_s` seconds; returns the configurations tried, in order.
    `stop` (set from another thread) ends the search after the current episode."""
    import time

    import numpy as np
    from stable_baselines3 import TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.noise import NormalActionNoise

    started = time.perf_counter()

    class StopWhenAsked(BaseCallback):
        def _on_step(self) -> bool:
            if stop is not None and stop.is_set():
                return False
            # past the episodes asked for, an episode boundary ends the search once the time is spent
            return not (
                len(env.history) >= episodes and env.at_episode_start and time.perf_counter() - started >= budget_s
            )

    n = env.n_layers
    agent = TD3(
        "MlpPolicy",
        env,
        seed=seed,
        device="cpu",
        verbose=0,
        learning_starts=warmup_episodes(episodes) * n,
        action_noise=NormalActionNoise(np.zeros(1), 0.3 * np.ones(1)),
        policy_kwargs={"net_arch": [64, 64]},
        train_freq=(1, "episode"),
        gradient_steps=-1,
        batch_size=64,
        learning_rate=1e-3,
        gamma=1.0,
        buffer_size=10_000,
    )
    # A logger with no outputs: SB3's default makes a /tmp/SB3-<time> folder on every learn(), even
    # with verbose=0, and nothing removes them (the benchmark's searches left dozens).
    agent.set_logger(Logger(folder=None, output_formats=[]))
    agent.learn(
        total_timesteps=(episodes * MAX_EPISODES_FACTOR if budget_s > 0 else episodes) * n, callback=StopWhenAsked()
    )
    return list(env.history)


def best(evaluations: Sequence[Evaluation], target_speedup: float, aim: float = DEFAULT_AIM) -> Evaluation | None:
    """The most accurate configuration that is fast enough (at the target x `aim`), ties to the
    faster; when none is, the one with the highest reward."""
    if not evaluations:
        return None
    fast = [e for e in evaluations if e.speedup >= target_speedup * aim]
    if fast:
        return max(fast, key=lambda e: (e.accuracy, e.speedup))
    return max(evaluations, key=lambda e: e.reward.value)
