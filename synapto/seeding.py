"""Every seed synapto uses is made here.

An evaluation's randomness is a pure function of (run seed, stream, keys...):
``SeedSequence(run_seed, spawn_key=(stream, *keys))``.  The MPI rank that happens
to run an evaluation never enters a seed, so results do not depend on the number
of ranks.  Each purpose has its own stream, so drawing more test episodes (say)
never shifts the training episodes.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Stream(IntEnum):
    """Independent random streams, one per purpose."""

    EVOLVE = 0  #: the coordinator's evolution operators (init, selection, pruning)
    TRAIN = 1  #: training episodes of generation g, individual i, episode e
    TEST = 2  #: the final champion test episodes
    VALIDATE = 3  #: validation episodes of the top candidates
    PPO = 4  #: PPO: per-rank environment and action sampling, parameter init
    REPLAY_SAMPLE = 5  #: which evaluations `replay --sample` picks
    PPO_TEST = 6  #: PPO policy test episodes
    SELECT = 7  #: the final selection episodes of the champion's candidates
    TUNE = 8  #: scoring champions of tuning runs (scripts/tune_score.py); no run draws from it


def check_run_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"run seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def seed_sequence(run_seed: int, stream: Stream, *keys: int) -> np.random.SeedSequence:
    """The SeedSequence of ``stream`` with spawn key ``keys`` under ``run_seed``."""
    return np.random.SeedSequence(
        check_run_seed(run_seed), spawn_key=(int(stream), *(int(k) for k in keys))
    )


def generator(run_seed: int, stream: Stream, *keys: int) -> np.random.Generator:
    """A fresh ``np.random.Generator`` (PCG64) for one purpose."""
    return np.random.Generator(np.random.PCG64(seed_sequence(run_seed, stream, *keys)))


def int_seed(run_seed: int, stream: Stream, *keys: int) -> int:
    """A plain Python ``int`` seed (what ``env.reset(seed=...)`` needs), 0 <= s < 2**63."""
    state = seed_sequence(run_seed, stream, *keys).generate_state(2, np.uint32)
    return int((int(state[1]) << 32 | int(state[0])) & ((1 << 63) - 1))


def episode_seeds(run_seed: int, stream: Stream, prefix: tuple[int, ...], n: int) -> np.ndarray:
    """Seeds of ``n`` episodes keyed ``(*prefix, e)`` for e in 0..n-1, as int64."""
    return np.array([int_seed(run_seed, stream, *prefix, e) for e in range(n)], dtype=np.int64)


def train_seeds(run_seed: int, generation: int, population: int, episodes: int,
                common: bool = False) -> np.ndarray:
    """Training episode seeds of one generation, shape (population, episodes).

    With ``common`` (common random numbers) every individual faces the same
    episodes: the seed depends on (run seed, generation, episode) only.
    """
    if common:
        row = episode_seeds(run_seed, Stream.TRAIN, (generation, 2**31), episodes)
        return np.tile(row, (population, 1))
    return np.stack(
        [episode_seeds(run_seed, Stream.TRAIN, (generation, i), episodes) for i in range(population)]
    ).reshape(population, episodes)


def test_seeds(run_seed: int, episodes: int) -> np.ndarray:
    """Seeds of the final champion test: a stream of its own."""
    return episode_seeds(run_seed, Stream.TEST, (), episodes)


def selection_seeds(run_seed: int, episodes: int) -> np.ndarray:
    """Seeds of the final selection among the champion's candidates: a stream of its own."""
    return episode_seeds(run_seed, Stream.SELECT, (), episodes)


def validation_seeds(run_seed: int, generation: int, episodes: int) -> np.ndarray:
    """Seeds of generation ``generation``'s validation episodes (shared by its candidates)."""
    return episode_seeds(run_seed, Stream.VALIDATE, (generation,), episodes)


def tuning_seeds(run_seed: int, episodes: int) -> np.ndarray:
    """Seeds of the episodes that score a tuning run's champion (a stream no run uses)."""
    return episode_seeds(run_seed, Stream.TUNE, (), episodes)
