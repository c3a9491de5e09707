"""Every strategy through the whole run: the analytic optimum, determinism across rank
counts, kill -9 and --resume, replay -- with observation normalisation and the final
selection -- and pruned connections that never revive, read back from the run files."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_run, kill_group, run_cli, start_cli, wait_for_line

from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import run_evolution
from synapto.parallel.farm import SerialFarm
from synapto.store import RunData

STRATEGIES = ["ga", "openai-es", "pgpe", "cmaes", "ars"]
#: a connection budget: 50 % of hebbian-dag 4-(3)-(2 + 1)'s 33 connections by generation 3
TARGET = {"prune_to": 0.5, "prune_end": 3, "prune_every": 1}
#: by hand, 33 (0.5 + 0.5 (1 - g/3)^3): 33, 21.4, 17.1, 16.5 -> 16 (rounded to even)
BUDGETS = [33, 21, 17, 16]
#: options that exercise each strategy's machinery in a few generations (pruning every generation):
#: ga and pgpe prune to a target (by the Hebbian traces the workers return, and at random from
#: the checkpointed Generator), the others by the agent's rate (cmaes spells no target: without
#: --config, evolve's cmaes options are the default experiment's, which prune to a target)
OPTIONS = {
    "ga": {**TARGET, "prune_by": "trace"},
    "openai-es": {"prune_every": 1, "init_std": 0.5},
    "pgpe": {**TARGET, "prune_by": "random", "init_std": 0.5},
    "cmaes": {"prune_every": 1, "init_std": 0.5, "prune_to": 0},
    "ars": {"prune_every": 1, "init_std": 0.5, "top": 2},
}


def _flags(strategy: str) -> list[str]:
    out = ["--strategy", strategy]
    for k, v in OPTIONS[strategy].items():
        out += ["--strategy-option", f"{k}={v}"]
    return out


RUN = [
    "evolve",
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--hidden",
    "3",
    "--population",
    "6",
    "--generations",
    "4",
    "--episodes",
    "2",
    "--validate-episodes",
    "2",
    "--validate-top",
    "2",
    "--select-episodes",
    "3",
    "--test-episodes",
    "3",
    "--obs-norm",
    "--seed",
    "7",
    "--max-env-steps",
    "0",
]


@pytest.fixture(scope="module", params=STRATEGIES)
def reference(request, tmp_path_factory):
    """The uninterrupted one-process run of each strategy."""
    strategy = request.param
    d = tmp_path_factory.mktemp(strategy)
    out = d / "ref.h5"
    r = run_cli(*RUN, *_flags(strategy), "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    with RunData(out) as run:  # the tests below cover compact files (noise keys, lineages) and files of populations
        # ga: lineages; openai-es, pgpe, ars: noise keys; cmaes: full covariance at this size
        assert run.compact == (strategy in ("ga", "openai-es", "pgpe", "ars"))
    return strategy, out


@pytest.mark.mpi
def test_same_run_file_for_one_and_three_ranks(reference, tmp_path):
    strategy, ref = reference
    out = tmp_path / "mpi.h5"
    r = run_cli(*RUN, *_flags(strategy), "--out", out, ranks=3, timeout=300)
    assert r.returncode == 0, r.stderr
    assert_same_run(ref, out)


@pytest.mark.mpi
def test_kill_in_a_generation_then_resume_equals_the_uninterrupted_run(reference, tmp_path):
    """Strategy state (Adam moments, sigma, covariance, the Generator) and the observation
    statistics come back from the checkpoint; the resumed run file equals the reference."""
    strategy, ref = reference
    out = tmp_path / "killed.h5"
    proc = start_cli(*RUN, *_flags(strategy), "--out", out, ranks=3, extra_env={"SYNAPTO_FAULT": "generation:2"})
    wait_for_line(proc, "FAULT-POINT generation 2", timeout=240)
    kill_group(proc)
    proc.wait(timeout=60)
    with RunData(out) as run:
        assert run.completed == 2 and not run.tested
    r = run_cli("evolve", "--resume", out, ranks=2, timeout=300)
    assert r.returncode == 0, r.stderr
    assert_same_run(ref, out)


def test_replay_is_exact_with_obs_norm_and_the_centre(reference):
    strategy, ref = reference
    r = run_cli("replay", ref, "--sample", "5", timeout=300)
    assert r.returncode == 0 and "5/5 bit-identical" in r.stdout, r.stdout + r.stderr
    who = -1 if strategy != "ga" else None  # an ES validates its centre (individual -1)
    with RunData(ref) as run:
        assert run.obs_norm(3) is not None and not np.array_equal(run.obs_norm(3)[0], run.obs_norm(0)[0])
        validated = run.validation_individual(2)
        assert (who in validated) if who is not None else (validated >= 0).all()
        individual = int(validated[0])
    r = run_cli("replay", ref, "--validation", "--generation", "2", "--individual", individual, timeout=300)
    assert r.returncode == 0 and "1/1 bit-identical" in r.stdout, r.stdout + r.stderr


def test_final_selection_and_test_are_stored(reference):
    """The champion is the best of the final candidates on the selection episodes, and its
    stored test returns come from the test stream with its generation's normalisation."""
    _strategy, ref = reference
    with RunData(ref) as run:
        sel, champ = run.selection(), run.champion()
        assert sel is not None and 0 <= sel.chosen < len(sel.fitness)
        assert sel.fitness[sel.chosen] == sel.fitness.max() == champ.selection_fitness
        assert np.array_equal(sel.genomes[sel.chosen], champ.genome)
        assert champ.tested and champ.test_returns.size == 3 and champ.obs_norm is not None
        g = int(sel.generation[sel.chosen])
        if g < run.completed:
            assert np.array_equal(champ.obs_norm[0], run.obs_norm(g)[0])


def test_a_target_budget_holds_through_the_run(reference):
    """Every genome evaluated (validated and selected ones too) is within its generation's
    budget; the budget recorded per generation is the schedule's; the final candidates and
    the champion have at most the final budget.  Runs without a target record no budget."""
    strategy, ref = reference
    with RunData(ref) as run:
        if not OPTIONS[strategy].get("prune_to"):
            assert "connection_budget" not in run.strategy_names()
            return
        pop = run.population()
        assert run.strategy("connection_budget").tolist() == BUDGETS
        for g, budget in enumerate(BUDGETS):
            assert np.count_nonzero(pop[g], axis=1).max() <= budget
        assert np.count_nonzero(pop[3], axis=1).max() == 16
        sel = run.selection()
        assert np.count_nonzero(sel.genomes, axis=1).max() <= 16
        assert np.count_nonzero(run.champion().genome) <= 16


def _union_nonzero(pop: np.ndarray) -> np.ndarray:
    return np.any(pop != 0, axis=0)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pruned_connections_never_revive_in_a_run(strategy, tmp_path):
    """A connection absent from every genome evaluated so far never appears in a later
    one; for the ES strategies every genome of a generation has its centre's zeros and
    the centre's connections only shrink -- while pruning does remove connections."""
    cfg = EvolveConfig(
        env="CartPole-v1",
        agent="hebbian-dag",
        hidden=(6,),
        population=8,
        generations=8,
        episodes=1,
        validate_episodes=1,
        test_episodes=0,
        seed=3,
        strategy=strategy,
        strategy_options={**OPTIONS[strategy], "prune_every": 1} if strategy != "ga" else {},
    )
    out = tmp_path / "run.h5"
    run_evolution(cfg, out, SerialFarm(), log=lambda s: None)
    with RunData(out) as run:
        pop = run.population()
        seen = _union_nonzero(pop[0])
        for g in range(1, len(pop)):
            now = _union_nonzero(pop[g])
            assert not np.any(now & ~seen), f"generation {g} revived a connection"
            seen |= now
        assert np.count_nonzero(pop[-1][0]) < np.count_nonzero(pop[0][0]) or strategy == "ga"
        if strategy != "ga":
            centre = run.strategy("centre")
            for g in range(len(pop)):
                assert np.all(pop[g][:, centre[g] == 0] == 0)
            alive = centre != 0
            assert np.all(alive[1:] <= alive[:-1]) and alive[-1].sum() < alive[0].sum()


@pytest.mark.parametrize(
    "strategy,options,threshold",
    [
        ("ga", {"mutation_std": 0.2}, -1e-3),
        ("openai-es", {"sigma": 0.05, "lr": 0.05, "prune": False, "init_std": 0.5}, -1e-3),
        ("pgpe", {"sigma": 0.1, "max_speed": 0.1, "prune": False, "init_std": 0.5}, -1e-3),
        ("cmaes", {"sigma": 0.3, "prune": False, "init_std": 0.5}, -1e-3),
        ("ars", {"sigma": 0.05, "lr": 0.05, "top": 4, "prune": False, "init_std": 0.5}, -1e-3),
    ],
)
def test_each_strategy_reaches_the_analytic_optimum(strategy, options, threshold, tmp_path):
    """On the one-step env whose return is -|action - target|^2 (best 0), the whole loop
    -- rollouts, validation, final selection, test -- finds the optimum."""
    import analytic_env  # noqa: F401  (registers Analytic-v0)

    cfg = EvolveConfig(
        env="analytic_env:Analytic-v0",
        agent="hebbian-dag",
        hidden=(3,),
        population=16,
        generations=60,
        episodes=1,
        validate_episodes=1,
        validate_top=2,
        select_episodes=2,
        test_episodes=2,
        seed=1,
        strategy=strategy,
        strategy_options=options,
    )
    out = tmp_path / "analytic.h5"
    summary = run_evolution(cfg, out, SerialFarm(), log=lambda s: None)
    assert threshold < summary.test_mean <= 0.0
    with RunData(out) as run:
        first = float(run.stats("best_fitness")[0])
    assert first < threshold  # the optimum was not there from the start
