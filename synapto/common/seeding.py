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
    SAMPLER = 9  #: ``synapto tune``: the Optuna sampler's seed before each new trial
    BASELINE = 10  #: ``bench race --sb3``: the seed of a Stable-Baselines3 run (torch, numpy, its env)


def check_run_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"run seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def seed_sequence(run_seed: int, stream: Stream, *keys: int) -> np.random.SeedSequence:
    """The SeedSequence of ``stream`` with spawn key ``keys`` under ``run_seed``."""
    return np.random.SeedSequence(check_run_seed(run_seed), spawn_key=(int(stream), *(int(k) for k in keys)))


def generator(run_seed: int, stream: Stream, *keys: int) -> np.random.Generator:
    """A fresh ``np.random.Generator`` (PCG64) for one purpose."""
    return np.random.Generator(np.random.PCG64(seed_sequence(run_seed, stream, *keys)))


def int_seed(run_seed: int, stream: Stream, *keys: int) -> int:
    """A plain Python ``int`` seed (what ``env.reset(seed=...)`` needs), 0 <= s < 2**63."""
    state = seed_sequence(run_seed, stream, *keys).generate_state(2, np.uint32)
    return int((int(state[1]) << 32 | int(state[0])) & ((1 << 63) - 1))


def episode_seeds(run_seed: int, stream: Stream, prefix: tuple[int, ...], n: int) -> np.ndarray:
    """Seeds of ``n`` episodes keyed ``(*prefix, e)`` for e in 0..n-1, as int64."""
    keys = np.empty((n, len(prefix) + 2), dtype=np.int64)
    keys[:, 0] = int(stream)
    keys[:, 1:-1] = prefix
    keys[:, -1] = np.arange(n)
    return int_seeds(run_seed, keys)


# -- many seeds at once -------------------------------------------------------------
# numpy's SeedSequence (O'Neill's seed_seq_fe with a pool of 4 words) vectorised over
# many spawn keys of the same length: a generation of 4096 individuals x 4 episodes
# needs 16,384 seeds, about 1 s one SeedSequence at a time and a few ms here.  Written
# here for speed; exactness is checked against SeedSequence itself (tests/test_seeding.py).
_POOL = 4
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _SHIFT = 0xCA01F9DD, 0x4973F715, 16
_U32 = 0xFFFFFFFF


def _words(value: int) -> list[int]:
    """A non-negative int as SeedSequence reads it: 32-bit words, least significant first."""
    words = [value & _U32]
    value >>= 32
    while value:
        words.append(value & _U32)
        value >>= 32
    return words


def int_seeds(run_seed: int, keys: np.ndarray) -> np.ndarray:
    """``int_seed(run_seed, *row)`` for every row of ``keys`` ((n, k) non-negative ints
    below 2**32; the first column is the stream), as int64; what ``int_seed`` computes
    through ``SeedSequence``, for all rows at once."""
    keys = np.asarray(keys, dtype=np.int64)
    if keys.size and (keys.min() < 0 or keys.max() > _U32):
        raise ValueError("spawn keys must be in [0, 2**32)")
    run = _words(check_run_seed(run_seed))
    run += [0] * (_POOL - len(run))  # SeedSequence pads the run entropy to the pool when spawn keys follow
    n = keys.shape[0]
    entropy = [np.full(n, w, dtype=np.uint32) for w in run] + [
        keys[:, j].astype(np.uint32) for j in range(keys.shape[1])
    ]
    const = _INIT_A

    def hashmix(value):
        nonlocal const
        value = value ^ np.uint32(const)
        const = const * _MULT_A & _U32
        value = value * np.uint32(const)
        return value ^ (value >> np.uint32(_SHIFT))

    def mix(x, y):
        r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return r ^ (r >> np.uint32(_SHIFT))

    pool = [hashmix(entropy[i]) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, len(entropy)):
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(entropy[src]))
    state, const = [], _INIT_B
    for i in range(2):  # generate_state(2, uint32)
        value = pool[i] ^ np.uint32(const)
        const = const * _MULT_B & _U32
        value = value * np.uint32(const)
        state.append(value ^ (value >> np.uint32(_SHIFT)))
    seeds = (state[1].astype(np.uint64) << np.uint64(32)) | state[0].astype(np.uint64)
    return (seeds & np.uint64((1 << 63) - 1)).astype(np.int64)


def train_seeds(run_seed: int, generation: int, population: int, episodes: int, common: bool = False) -> np.ndarray:
    """Training episode seeds of one generation, shape (population, episodes).

    With ``common`` (common random numbers) every individual faces the same
    episodes: the seed depends on (run seed, generation, episode) only.
    """
    if common:
        row = episode_seeds(run_seed, Stream.TRAIN, (generation, 2**31), episodes)
        return np.tile(row, (population, 1))
    i, e = np.divmod(np.arange(population * episodes, dtype=np.int64), max(episodes, 1))
    keys = np.stack([np.full_like(i, int(Stream.TRAIN)), np.full_like(i, generation), i, e], axis=1)
    return int_seeds(run_seed, keys).reshape(population, episodes)


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


def sampler_seed(study_seed: int, finished: int) -> int:
    """``synapto tune``'s sampler seed for the trial asked after ``finished`` finished trials: a
    rerun of a killed study samples what the uninterrupted one would (numpy's RandomState
    inside Optuna's samplers takes seeds below 2**32)."""
    return int_seed(study_seed, Stream.SAMPLER, finished) & 0xFFFFFFFF
