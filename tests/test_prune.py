"""Pruning to a connection budget (the strategies' prune_to options): the schedule's
budgets, each criterion on hand-made genomes, every strategy reaching the target on
schedule without ever exceeding it, and bad options refused in one line."""

import numpy as np
import pytest
from conftest import run_cli

from synapto.agents.hebbian_dag import HebbianDAG
from synapto.agents.pruned_mlp import PrunedMLP
from synapto.common.errors import UsageError
from synapto.envs import SpaceInfo
from synapto.evolution.strategies.base import Candidates, Feedback, check_never_revived, strategy_class
from synapto.evolution.strategies.prune import Schedule, inert, prune_to

BOX = SpaceInfo(obs_dim=2, act_dim=1, discrete=False, low=-np.ones(1), high=np.ones(1), max_episode_steps=50)
STRATEGIES = ("ga", "openai-es", "pgpe", "cmaes")


def test_budgets_follow_the_cubic_in_steps():
    """Dense 100, target 10 %, from generation 2 to 12 in steps of 5 generations: by hand,
    100 (0.1 + 0.9 (1 - 5/10)^3) = 21.25 -> 21 for generations 7..11, 10 from 12 on."""
    s = Schedule(dense=100, target=0.1, start=2, end=12, every=5)
    assert [s.budget(g) for g in range(15)] == [100] * 7 + [21] * 5 + [10] * 3
    every = Schedule(dense=100, target=0.25, start=0, end=4, every=1)
    # 100 (0.25 + 0.75 (3/4)^3) = 56.64; (1/2)^3: 34.375; (1/4)^3: 26.17
    assert [every.budget(g) for g in range(6)] == [100, 57, 34, 26, 25, 25]


# ---------------------------------------------------------------- criteria on a hand-made genome
# pruned-mlp 2-2-1: W1 (2 inputs x 2 hidden) = genome[0:4] row-major, W2 (2 hidden x 1) = genome[4:6].
# Hidden unit 1 sends nothing (W2[1] = 0): its inputs W1[:, 1] (genome 1 and 3) are inert.
MLP = PrunedMLP(BOX, (2,))
GENOME = np.array(
    [
        0.5,
        -2.0,  # x0 -> h0, x0 -> h1 (inert, the largest weight)
        0.1,
        0.3,  # x1 -> h0, x1 -> h1 (inert)
        1.0,
        0.0,
    ]
)  # h0 -> out, h1 -> out (pruned)


def test_inert_connections_are_those_that_cannot_reach_an_action():
    assert inert(MLP.layout(), GENOME).tolist() == [False, True, False, True, False, False]
    # a unit that receives nothing: h0 cut from both inputs makes h0 -> out inert too
    cut = np.array([0.0, -2.0, 0.0, 0.3, 1.0, 0.7])
    assert inert(MLP.layout(), cut).tolist() == [False, False, False, False, True, False]


def test_magnitude_removes_inert_connections_then_the_smallest_weights():
    rng = np.random.default_rng(0)
    out = prune_to(GENOME, 3, "magnitude", None, rng, MLP.layout())  # 5 alive -> 3: both inert ones
    assert out.tolist() == [0.5, 0.0, 0.1, 0.0, 1.0, 0.0]
    out = prune_to(GENOME, 2, "magnitude", None, rng, MLP.layout())  # then the smallest |w|, 0.1
    assert out.tolist() == [0.5, 0.0, 0.0, 0.0, 1.0, 0.0]
    plain = prune_to(GENOME, 3, "magnitude", None, rng, None)  # without a layout: |w| alone (0.1, 0.3)
    assert plain.tolist() == [0.5, -2.0, 0.0, 0.0, 1.0, 0.0]


def test_a_unit_cut_off_by_a_removal_loses_its_other_connections_next():
    """h0's only input is the smallest weight: once it goes, h0 -> out (the largest weight)
    cannot change the action any more and goes before the next smallest, x0 -> h1."""
    genome = np.array(
        [
            0.1,
            0.5,
            0.0,
            0.6,  # x0 -> h0, x0 -> h1, x1 -> h0 (pruned), x1 -> h1
            3.0,
            0.7,
        ]
    )  # h0 -> out, h1 -> out
    assert not inert(MLP.layout(), genome).any()
    out = prune_to(genome, 3, "magnitude", None, np.random.default_rng(0), MLP.layout())
    assert out.tolist() == [0.0, 0.5, 0.0, 0.6, 0.0, 0.7]


def test_trace_removes_the_weakest_traces():
    stats = np.array([0.2, 9.0, 0.05, 0.4, 3.0, 0.0])
    out = prune_to(GENOME, 2, "trace", stats, np.random.default_rng(0), None)
    assert out.tolist() == [0.0, -2.0, 0.0, 0.0, 1.0, 0.0]  # 0.05, 0.2, 0.4 go
    out = prune_to(GENOME, 2, "trace", stats, np.random.default_rng(0), MLP.layout())
    assert out.tolist() == [0.5, 0.0, 0.0, 0.0, 1.0, 0.0]  # the inert ones (9.0 and 0.4), then 0.05


def test_random_ignores_weights_and_inertness():
    """Each of the 5 surviving connections is the one removed about 1/5 of the time."""
    counts = np.zeros(6)
    for seed in range(2000):
        out = prune_to(GENOME, 4, "random", None, np.random.default_rng(seed), MLP.layout())
        counts += (GENOME != 0) & (out == 0)
    assert counts[5] == 0 and counts.sum() == 2000
    np.testing.assert_allclose(counts[:5] / 2000, 0.2, atol=0.03)


def test_within_budget_nothing_changes_and_nothing_is_drawn():
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    assert prune_to(GENOME, 5, "magnitude", None, rng, MLP.layout()).tolist() == GENOME.tolist()
    assert rng.bit_generator.state == before


def test_the_modulation_unit_is_inert_unless_it_modulates():
    """hebbian-dag 2-(2)-(1 + modulation): the last matrix takes all 4 earlier units to
    [mod, a0]; without neuromodulation its column 0 cannot change an action."""
    plain, modulated = HebbianDAG(BOX, (2,)), HebbianDAG(BOX, (2,), {"neuromodulate": True})
    full = np.ones(plain.n_params)
    last = plain.layout().blocks
    expected = np.zeros(plain.n_params, bool)
    start = plain._slices[-1].start
    expected[start : start + 8 : 2] = True  # the (4 x 2) matrix, column 0
    assert inert(plain.layout(), full).tolist() == expected.tolist()
    assert not inert(modulated.layout(), full).any() and len(last) == 3


# ---------------------------------------------------------------- strategies on schedule
def _feedback(g, x, fitness, stats=None):
    """What a generation without validation tells its strategy."""
    return Feedback(
        g,
        fitness,
        np.abs(x) if stats is None else stats,
        np.count_nonzero(x, axis=1),
        Candidates(np.zeros(0, np.int64), np.zeros((0, x.shape[1]))),
        np.zeros(0),
    )


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("by", ["magnitude", "random"])
def test_every_strategy_reaches_the_budget_on_schedule_and_never_exceeds_it(name, by):
    """pruned-mlp 2-8-1 (24 connections, 25 % pruned at the start), target 25 % = 6 from
    generation 1 to 5: budgets 24, 24, 14, 8, 6, 6, ... (by hand: 24 (0.25 + 0.75 (1 - t/4)^3)
    for t = g - 1: 13.6, 8.25, 6.28).
    Every genome asked for is within its generation's budget; from generation 5 on the
    centre (the GA: every genome) has exactly 6; no connection revives; the champion and
    the final candidates (validated genomes kept from earlier, denser generations) are
    within the budget of the generation just told."""
    agent = PrunedMLP(BOX, (8,))
    budgets = [24, 24, 14, 8, 6, 6, 6, 6, 6, 6]
    opts = {"prune_to": 0.25, "prune_start": 1, "prune_end": 5, "prune_every": 1, "prune_by": by}
    if name != "ga":
        opts["init_std"] = 0.5
    s = strategy_class(name)(agent, 8, opts, np.random.default_rng(3))
    s.start()
    rng = np.random.default_rng(1)
    zeros = s.ask()[0].copy() if name != "ga" else np.ones(agent.n_params)
    for g, budget in enumerate(budgets):
        x = s.ask()
        counts = np.count_nonzero(x, axis=1)
        assert counts.max() <= budget, (g, counts, budget)
        if name != "ga":
            assert check_never_revived(s.centre, x) and check_never_revived(zeros, s.centre)
            zeros = s.centre.copy()
        if g >= 5:
            assert (np.count_nonzero(s.centre) == 6) if name != "ga" else (counts == 6).all()
        fitness = rng.standard_normal(len(x))
        cand = s.candidates(fitness, 2)  # validated on "fresh episodes": kept by the hall of fame
        s.tell(Feedback(g, fitness, np.abs(x), counts, cand, rng.standard_normal(len(cand.individual))))
        assert s.record()["connection_budget"] == budget
        assert np.count_nonzero(s.champion.genome) <= budget
        assert all(np.count_nonzero(c.genome) <= budget for c in s.final_candidates())


def test_the_ga_prunes_every_child_by_the_trace_of_its_parent():
    """hebbian-dag with stats = |weight| reversed in rank: pruning by trace keeps the
    connections whose (reported) trace is strongest, whatever their weights."""
    agent = HebbianDAG(BOX, (3,), {"init_prune": 0.0})
    s = strategy_class("ga")(
        agent, 8, {"prune_to": 0.5, "prune_end": 1, "prune_by": "trace", "mutation_std": 0.0}, np.random.default_rng(0)
    )
    s.start()
    x = s.ask()
    stats = np.tile(np.arange(agent.n_params, dtype=np.float64), (8, 1))  # later connections: stronger
    s.tell(_feedback(0, x, np.arange(8.0), stats))
    keep = round(agent.n_params * 0.5)
    layout_inert = inert(agent.layout(), np.ones(agent.n_params))
    for child in s.ask():
        alive = np.flatnonzero(child)
        assert alive.size == keep
        # the survivors: the strongest traces among the connections that can act
        useful = np.flatnonzero(~layout_inert)
        assert alive.tolist() == sorted(useful[-keep:].tolist())


# ---------------------------------------------------------------- bad options
BAD = [
    ({"prune_to": 1.5}, "prune_to"),
    ({"prune_to": -0.1}, "prune_to"),
    ({"prune_to": True}, "prune_to"),
    ({"prune_to": 0.5, "prune_by": "size"}, "prune_by"),
    ({"prune_start": -1}, "prune_start"),
    ({"prune_start": 10, "prune_end": 10}, "prune_end"),
    ({"prune_end": 2.5}, "prune_end"),
    ({"prune_to": 0.5, "prune": False}, "prune_to"),
]


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("options,needle", BAD, ids=[next(iter(o)) + str(i) for i, (o, _) in enumerate(BAD)])
def test_bad_target_options_are_refused_in_one_line(name, options, needle):
    with pytest.raises(UsageError) as exc:
        strategy_class(name)(MLP, 8, options, np.random.default_rng(0))
    assert "\n" not in str(exc.value) and needle in str(exc.value)


def test_pruning_by_trace_needs_an_agent_with_traces(tmp_path):
    """Refused before anything is written: one line, exit 2."""
    out = tmp_path / "run.h5"
    r = run_cli(
        "evolve",
        "--env",
        "CartPole-v1",
        "--agent",
        "pruned-mlp",
        "--strategy",
        "openai-es",
        "--strategy-option",
        "prune_to=0.5",
        "--strategy-option",
        "prune_by='trace'",
        "--out",
        out,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "traces" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []
