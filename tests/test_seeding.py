import numpy as np
import pytest

from synapto.common import seeding
from synapto.common.seeding import Stream


def test_seed_is_a_pure_function_of_its_keys():
    a = seeding.int_seed(7, Stream.TRAIN, 3, 4, 5)
    b = seeding.int_seed(7, Stream.TRAIN, 3, 4, 5)
    assert a == b and type(a) is int and 0 <= a < 2**63


def test_every_key_changes_the_seed():
    base = seeding.int_seed(7, Stream.TRAIN, 3, 4, 5)
    variants = [
        seeding.int_seed(8, Stream.TRAIN, 3, 4, 5),
        seeding.int_seed(7, Stream.TEST, 3, 4, 5),
        seeding.int_seed(7, Stream.TRAIN, 2, 4, 5),
        seeding.int_seed(7, Stream.TRAIN, 3, 5, 5),
        seeding.int_seed(7, Stream.TRAIN, 3, 4, 6),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


def test_matches_seedsequence_spawn_key_definition():
    ss = np.random.SeedSequence(13, spawn_key=(int(Stream.TRAIN), 2, 1, 0))
    lo, hi = ss.generate_state(2, np.uint32)
    assert seeding.int_seed(13, Stream.TRAIN, 2, 1, 0) == ((int(hi) << 32 | int(lo)) & (2**63 - 1))


def test_train_seeds_shape_and_layout():
    s = seeding.train_seeds(5, generation=2, population=4, episodes=3)
    assert s.shape == (4, 3) and s.dtype == np.int64
    assert s[1, 2] == seeding.int_seed(5, Stream.TRAIN, 2, 1, 2)
    assert len(np.unique(s)) == 12


def test_common_random_numbers_give_every_individual_the_same_episodes():
    s = seeding.train_seeds(5, generation=2, population=4, episodes=3, common=True)
    assert (s == s[0]).all() and len(np.unique(s[0])) == 3
    assert not np.array_equal(s[0], seeding.train_seeds(5, 3, 4, 3, common=True)[0])


def test_test_stream_is_separate_from_training():
    test = set(seeding.test_seeds(5, 50).tolist())
    train = set(seeding.train_seeds(5, 0, 20, 5).ravel().tolist())
    assert not test & train


def test_generators_are_reproducible_and_stream_separated():
    a = seeding.generator(1, Stream.EVOLVE).random(5)
    assert np.array_equal(a, seeding.generator(1, Stream.EVOLVE).random(5))
    assert not np.array_equal(a, seeding.generator(1, Stream.TRAIN).random(5))


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_run_seed_is_rejected(bad):
    with pytest.raises(ValueError):
        seeding.int_seed(bad, Stream.TRAIN)


@pytest.mark.parametrize("run_seed", [0, 13, 2**32 - 1, 2**32, 2**64 + 3, 2**100])
def test_many_seeds_at_once_are_those_of_seedsequence(run_seed):
    """int_seeds (SeedSequence vectorised over spawn keys) equals int_seed, which asks
    numpy's SeedSequence, key by key: keys of 1 to 5 words, edge values included."""
    rng = np.random.default_rng(run_seed % 1000)
    for k in range(1, 6):
        keys = rng.integers(0, 2**32, size=(50, k))
        keys[:4] = [[0] * k, [2**32 - 1] * k, [2**31] * k, [1] * k]
        want = [seeding.int_seed(run_seed, *map(int, row)) for row in keys]
        assert seeding.int_seeds(run_seed, keys).tolist() == want
