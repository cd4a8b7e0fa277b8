"""The gymnasium env: one step per prunable layer, a real evaluation after the last one."""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from trainpilot.compress.env import CompressionEnv
from trainpilot.compress.evaluate import Evaluation


def test_gymnasium_env_checker_passes(evaluator) -> None:
    env = CompressionEnv(evaluator.layers, evaluator)
    check_env(env, skip_render_check=True)


def test_reset_step_contract(evaluator) -> None:
    env = CompressionEnv(evaluator.layers, evaluator, max_sparsity=0.6)
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs) and info["layer"] == "features.0"
    assert env.n_layers == 2
    obs, reward, terminated, truncated, info = env.step(np.array([1.0], dtype=np.float32))  # the maximum
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert obs[9] == pytest.approx(1.0)  # the previous layer's action, as a share of the maximum
    obs, reward, terminated, truncated, info = env.step(np.array([-1.0], dtype=np.float32))  # none
    assert terminated and not truncated and env.observation_space.contains(obs)
    evaluation = info["evaluation"]
    assert isinstance(evaluation, Evaluation) and reward == evaluation.reward.value
    assert evaluation.kept["features.3"] == 32 and 5 <= evaluation.kept["features.0"] <= 7  # 60% of 16 removed
    assert evaluation.cycles == "measured" and evaluation.speedup > 0 and 0.0 <= evaluation.accuracy <= 1.0
    assert env.history == [evaluation]
    with pytest.raises(RuntimeError):
        env.step(np.array([0.0], dtype=np.float32))


def test_actions_map_linearly_to_sparsity(evaluator) -> None:
    env = CompressionEnv(evaluator.layers, evaluator, max_sparsity=0.8)
    assert [env.sparsity_of([a]) for a in (-1.0, 0.0, 1.0, 5.0)] == pytest.approx([0.0, 0.4, 0.8, 0.8])


def test_a_search_leaves_no_log_folders_behind(evaluator, tmp_path, monkeypatch) -> None:
    """stable-baselines3's default logger makes a <tmp>/SB3-<time> folder on every learn(), even
    with verbose=0; a search must leave nothing behind in the user's temporary directory."""
    import tempfile

    from trainpilot.compress.search import run_search

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tried = run_search(CompressionEnv(evaluator.layers, evaluator, max_sparsity=0.6), episodes=2, seed=0)
    assert len(tried) == 2
    assert list(tmp_path.iterdir()) == []
