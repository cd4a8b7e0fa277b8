"""Shares refined from the ranks' own training steps (distributed/speed.refined_shares)."""
from __future__ import annotations

from trainpilot.parallel.rank_speed import RankSpeeds, refined_shares


class TwoRanks:
    """A process group's gather as seen by rank 0 of two, with rank 1's figure fixed (test double)."""

    world_size, rank = 2, 0

    def __init__(self, other: float):
        self.other = other

    def gather(self, obj, what):
        return [obj, self.other]


def test_shares_follow_the_speeds_seen_in_training_not_the_probe():
    probe = RankSpeeds((1e-3, 2.4e-3), (180, 76), "measured")  # the probe said rank 1 is 2.4x slower
    # in training, rank 0's forwards took 0.30 ms a sample and rank 1's 0.45 ms: 1.5x, not 2.4x
    new = refined_shares(TwoRanks(0.45e-3), [0.31e-3, 0.30e-3, 0.29e-3], probe, 256, epoch=1)
    assert new.source == "epoch 1" and new.policy == "measured"
    assert sum(new.shares) == 256 and abs(new.shares[0] / new.shares[1] - 1.5) < 0.05, new.shares
    assert abs(new.per_sample_s[1] / new.per_sample_s[0] - 1.5) < 1e-9
    # scaled to the previous estimate: still whole-step seconds per sample, not forward-only ones
    assert abs(sum(new.per_sample_s) - sum(probe.per_sample_s)) < 1e-12
    assert "from epoch 1's training steps" in new.describe()


def test_a_rank_that_timed_nothing_keeps_the_previous_shares():
    probe = RankSpeeds((1e-3, 2e-3), (171, 85), "measured")
    assert refined_shares(TwoRanks(0.0), [0.3e-3], probe, 256, epoch=1) is probe
    assert refined_shares(TwoRanks(0.4e-3), [], probe, 256, epoch=1) is probe


def test_steps_that_lost_the_core_count_the_mean_not_the_median():
    probe = RankSpeeds((1e-3, 1e-3), (128, 128), "measured")
    # rank 0 ran 4 steps untouched and lost the core for one 10x as long: the step waited for that
    # one too, so its figure is the mean, 2.8e-4 a sample, against rank 1's steady 1.4e-4
    new = refined_shares(TwoRanks(1.4e-4), [1e-4, 1e-4, 1e-4, 1e-4, 1e-3], probe, 256, epoch=1)
    assert new.shares[0] < new.shares[1], new.shares
    assert abs(new.per_sample_s[0] / new.per_sample_s[1] - 2.0) < 1e-9
