"""Validated champions, common random numbers, weight mutation."""

import h5py
import numpy as np
import pytest
from conftest import assert_same_run, kill_group, run_cli, start_cli, wait_for_line

from synapto.common import seeding
from synapto.evolution.strategies.ga import perturb
from synapto.store import RunData

RUN = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--population",
    "12",
    "--generations",
    "4",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "--seed",
    "21",
    "--test-episodes",
    "3",
    "--validate-episodes",
    "3",
    "--validate-top",
    "3",
    "--mutation-std",
    "0.1",
    "--crn",
    # the GA, champion on validation fitness: spelled, as evolve's defaults are the default experiment's
    "--strategy",
    "ga",
    "--select-episodes",
    "0",
    "--max-env-steps",
    "0",
]


def test_validation_training_and_test_streams_are_distinct_and_pure():
    val = seeding.validation_seeds(4, 2, 16)
    assert np.array_equal(val, seeding.validation_seeds(4, 2, 16))
    train = seeding.train_seeds(4, 2, 8, 16).ravel()
    crn = seeding.train_seeds(4, 2, 8, 16, common=True).ravel()
    test = seeding.test_seeds(4, 100)
    for a, b in [(val, train), (val, crn), (val, test), (crn, test), (train, test)]:
        assert not set(a.tolist()) & set(b.tolist())
    assert not set(val.tolist()) & set(seeding.validation_seeds(4, 3, 16).tolist())


def test_weight_mutation_never_revives_a_pruned_connection():
    g = np.array([0.0, 1.5, 0.0, -2.0, 0.3])
    child = perturb(g, 0.5, np.random.default_rng(0))
    assert np.all(child[g == 0] == 0)
    assert np.all(child[g != 0] != g[g != 0])
    assert np.array_equal(perturb(g, 0.5, np.random.default_rng(0)), child)


@pytest.fixture(scope="module")
def validated_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("val") / "serial.h5"
    proc = run_cli("evolve", *RUN, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


def test_crn_gives_every_individual_the_same_training_episodes(validated_run):
    with h5py.File(validated_run, "r") as f:
        seeds = f["seeds"][()]
        assert np.all(seeds == seeds[:, :1, :])  # within a generation: identical rows
        assert not np.array_equal(seeds[0, 0], seeds[1, 0])  # across generations: fresh


def test_champion_is_chosen_on_validation_fitness(validated_run):
    with h5py.File(validated_run, "r") as f:
        vf, who = f["validation/fitness"][()], f["validation/individual"][()]
        fit = f["fitness"][()]
        assert who.shape == (4, 3) and f["validation/returns"].shape == (4, 3, 3)
        # the candidates are the top 3 by training fitness
        for g in range(4):
            assert sorted(fit[g][who[g]]) == sorted(np.sort(fit[g])[-3:])
        assert f["champion/fitness"][0] == vf.max()
        g = int(f["champion/generation"][0])
        champ = f["champion/genome"][()]
        # validation steps are counted apart from training steps
        np.testing.assert_array_equal(f["stats/validation_env_steps"][()], np.cumsum(f["validation/steps"][()].sum(1)))
        np.testing.assert_array_equal(f["stats/env_steps"][()], np.cumsum(f["steps"][()].sum(1)))
    with RunData(validated_run) as run:  # the GA's genomes, rebuilt from its lineages
        np.testing.assert_array_equal(champ, run.population(g, who[g][np.argmax(vf[g])]))


def test_replay_of_a_validation_evaluation(validated_run):
    with h5py.File(validated_run, "r") as f:
        i = int(f["validation/individual"][2, 1])
    proc = run_cli("replay", validated_run, "--generation", "2", "--individual", str(i), "--validation")
    assert proc.returncode == 0 and "1/1 bit-identical" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_validated_runs_bit_identical_across_ranks_and_resume(validated_run, tmp_path):
    three = tmp_path / "three.h5"
    proc = run_cli("evolve", *RUN, "--out", three, ranks=3)
    assert proc.returncode == 0, proc.stderr
    assert_same_run(validated_run, three)
    resumed = tmp_path / "resumed.h5"
    proc = start_cli("evolve", *RUN, "--out", resumed, extra_env={"SYNAPTO_FAULT": "generation:2"})
    wait_for_line(proc, "FAULT-POINT")
    kill_group(proc)
    proc.wait(timeout=30)
    proc = run_cli("evolve", "--resume", resumed, ranks=3)
    assert proc.returncode == 0, proc.stderr
    assert_same_run(validated_run, resumed)
