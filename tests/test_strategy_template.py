"""Strategy.tell as a template method: a strategy that implements only its own step
(``_step``) gets from the base the checks of what it is told, the cut to a connection
budget (``prune_to``) and the count of generations."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from synapto.agents.hebbian_dag import HebbianDAG
from synapto.agents.pruned_mlp import PrunedMLP
from synapto.common.errors import UsageError
from synapto.envs import SpaceInfo
from synapto.evolution.strategies import prune
from synapto.evolution.strategies.base import Candidates, Champion, Feedback, Strategy, check_never_revived
from synapto.evolution.strategies.hall import HallOfFame
from synapto.evolution.strategies.options import Option, check_target, need_positive

BOX = SpaceInfo(obs_dim=2, act_dim=1, discrete=False, low=-np.ones(1), high=np.ones(1), max_episode_steps=50)


class Drift(Strategy):
    """Every genome's surviving weights take a Gaussian step: nothing but the hook."""

    name = "drift"
    OPTIONS: ClassVar[dict[str, Option]] = {"step": Option(0.1, "std of each weight's step"), **prune.OPTIONS}

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        out["step"] = need_positive("step", out["step"])
        return check_target(out)

    def start(self):
        self.genomes = np.stack([self.agent.init_genome(self.rng) for _ in range(self.population)])
        self.hof = HallOfFame.empty(1, self.agent.n_params)

    def ask(self):
        return self.genomes

    def _step(self, feedback):
        self.hof.add(feedback.fitness, self.genomes, self.generation)
        noise = self.options["step"] * self.rng.standard_normal(self.genomes.shape)
        self.genomes = self.genomes + noise * (self.genomes != 0)

    @property
    def champion(self):
        return self.hof.members()[0] if self.hof.members() else Champion(self.genomes[0], -np.inf, -1)

    def state(self):
        return {"genomes": self.genomes}, {"generation": self.generation}

    def restore(self, arrays, scalars):
        self.genomes, self.generation = np.array(arrays["genomes"]), int(scalars["generation"])


def told(g, x, fitness, stats=None):
    return Feedback(
        g,
        fitness,
        np.abs(x) if stats is None else stats,
        np.count_nonzero(x, axis=1),
        Candidates(np.zeros(0, np.int64), np.zeros((0, x.shape[1]))),
        np.zeros(0),
    )


def test_the_base_counts_generations_and_checks_what_it_is_told():
    s = Drift(PrunedMLP(BOX, (8,)), 6, {}, np.random.default_rng(0))
    s.start()
    assert s.generation == 0 and s.schedule is None
    x = s.ask().copy()
    s.tell(told(0, x, np.arange(6.0)))
    assert s.generation == 1 and not np.array_equal(s.ask(), x)
    assert check_never_revived(x, s.ask())
    assert s.champion.fitness == 5.0 and s.champion.generation == 0
    with pytest.raises(RuntimeError, match="told generation 0, expected 1"):
        s.tell(told(0, s.ask(), np.arange(6.0)))
    with pytest.raises(RuntimeError, match="fitness values for a population of 6"):
        s.tell(told(1, s.ask(), np.arange(5.0)))
    bad = Feedback(
        1,
        np.arange(6.0),
        np.abs(s.ask()),
        np.count_nonzero(s.ask(), axis=1),
        Candidates(np.zeros(2, np.int64), s.ask()[:2]),
        np.zeros(1),
    )
    with pytest.raises(RuntimeError, match="1 validation fitness values for 2 candidates"):
        s.tell(bad)
    assert s.generation == 1  # nothing refused was counted


def test_the_base_checks_the_options_and_the_agent():
    with pytest.raises(UsageError, match="strategy 'drift' has no option"):
        Drift(PrunedMLP(BOX, (8,)), 6, {"sigma": 1.0}, np.random.default_rng(0))
    with pytest.raises(UsageError, match="needs an agent with Hebbian traces"):
        Drift(PrunedMLP(BOX, (8,)), 6, {"prune_to": 0.5, "prune_by": "trace"}, np.random.default_rng(0))


@pytest.mark.parametrize("by", ["magnitude", "random"])
def test_the_base_cuts_the_population_to_the_budget(by):
    """pruned-mlp 2-8-1 (24 connections), target 25 % = 6 from generation 1 to 5: budgets
    24, 24, 14, 8, 6, ... (as in test_prune); the hook never prunes, the base does."""
    agent = PrunedMLP(BOX, (8,))
    s = Drift(agent, 6, {"prune_to": 0.25, "prune_start": 1, "prune_end": 5, "prune_by": by}, np.random.default_rng(3))
    s.start()
    for g, budget in enumerate([24, 24, 14, 8, 6, 6, 6]):
        x = s.ask().copy()
        assert np.count_nonzero(x, axis=1).max() <= budget, (g, budget)
        s.tell(told(g, x, np.arange(6.0)))
        assert check_never_revived(x, s.ask())
    assert (np.count_nonzero(s.ask(), axis=1) == 6).all()


def test_a_trace_budget_ranks_by_the_told_populations_mean_trace():
    """hebbian-dag, traces rising with the connection's index: the connections kept are
    the strongest by trace (inert ones go first), whatever the weights."""
    agent = HebbianDAG(BOX, (3,), {"init_prune": 0.0})
    s = Drift(agent, 4, {"prune_to": 0.5, "prune_end": 1, "prune_by": "trace", "step": 1e-6}, np.random.default_rng(0))
    s.start()
    x = s.ask().copy()
    stats = np.tile(np.arange(agent.n_params, dtype=np.float64), (4, 1))
    s.tell(told(0, x, np.arange(4.0), stats))
    keep = round(agent.n_params * 0.5)
    for child in s.ask():
        alive = np.flatnonzero(child)
        assert alive.size <= keep
        expected = prune.prune_to(
            np.ones(agent.n_params), keep, "trace", stats[0], np.random.default_rng(0), agent.layout()
        )
        assert alive.tolist() == np.flatnonzero(expected).tolist()


def test_the_hall_of_fame_keeps_the_best_and_forgets_by_emptying():
    hof = HallOfFame.empty(2, 3, {"row": ((), "i8")})
    hof.add([1.0, 3.0, 2.0], np.eye(3), 0, row=np.arange(3))
    assert hof.fitness.tolist() == [3.0, 2.0] and hof.columns["row"].tolist() == [1, 2]
    hof.add([2.0], np.ones((1, 3)), 1, row=[7])  # new ones first on ties
    assert hof.generation.tolist() == [0, 1] and hof.columns["row"].tolist() == [1, 7]
    hof.forget([True, False])
    assert hof.fitness.tolist() == [2.0, -np.inf] and hof.columns["row"].tolist() == [7, -1]
    assert hof.generation.tolist() == [1, -1] and not hof.genomes[1].any()
    assert [c.fitness for c in hof.members()] == [2.0]


class Walk(Drift):
    """Drift with a declared state: the base saves and restores it, no hook of its own."""

    name = "walk"
    STATE = ("genomes", "scale")
    scale = 1.0
    state = Strategy.state
    restore = Strategy.restore

    def _step(self, feedback):
        super()._step(feedback)
        self.scale *= 0.5


def test_the_base_saves_and_restores_the_declared_state():
    """STATE names the attributes: arrays come back as float64 arrays (copies), numbers as
    float scalars beside the generation counter; the restored strategy goes on the same."""
    a = Walk(PrunedMLP(BOX, (8,)), 4, {}, np.random.default_rng(0))
    a.start()
    a.tell(told(0, a.ask(), np.arange(4.0)))
    arrays, scalars = a.state()
    assert sorted(arrays) == ["genomes"] and scalars == {"generation": 1, "scale": 0.5}
    assert np.array_equal(arrays["genomes"], a.genomes) and arrays["genomes"] is not a.genomes
    b = Walk(PrunedMLP(BOX, (8,)), 4, {}, np.random.default_rng(0))
    b.rng.bit_generator.state = a.rng.bit_generator.state
    b.restore(arrays, scalars)
    assert b.generation == 1 and b.scale == 0.5 and b.genomes.dtype == np.float64
    for s in (a, b):
        s.hof = HallOfFame.empty(1, s.agent.n_params)
        s.tell(told(1, s.ask(), np.arange(4.0)))
    assert np.array_equal(a.ask(), b.ask()) and b.scale == 0.25


def test_cmaes_refuses_a_population_below_4_when_its_options_are_checked():
    from synapto.evolution.strategies.cmaes import CMAES

    with pytest.raises(UsageError, match=r"needs a population >= 4, got 3"):
        CMAES.check_population(3, {})
    with pytest.raises(UsageError, match=r"needs a population >= 2, got 1"):
        CMAES.check_population(1, {})
