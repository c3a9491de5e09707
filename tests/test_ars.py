"""``ars`` (Augmented Random Search) through ask / tell: the update of the paper, computed
here from the genomes it asked for; the top-b rule; raw returns, not ranks; directions
with a non-finite side left out; a linear policy and a hidden layer both learn."""

import numpy as np
import pytest
from test_strategies import Vector, generation, make, sphere

from synapto.agents.pruned_mlp import PrunedMLP
from synapto.envs import SpaceInfo
from synapto.evolution.strategies.base import Feedback, strategy_class


def tell(s, g, f):
    x = s.ask()
    s.tell(
        Feedback(
            g,
            np.asarray(f, dtype=np.float64),
            np.zeros_like(x),
            np.count_nonzero(x, axis=1),
            s.candidates(f, 0),
            np.zeros(0),
        )
    )


def expected_step(x, centre, sigma, f, b, lr):
    """The ARS update written out: directions from the asked genomes, the b best by
    max(r+, r-), scaled by lr / (b * std of their 2b returns)."""
    d = (x[0::2] - centre) / sigma
    plus, minus = f[0::2], f[1::2]
    top = np.argsort(-np.maximum(plus, minus), kind="stable")[:b]
    std = np.std(np.r_[plus[top], minus[top]])
    return lr / (b * std) * sum((plus[k] - minus[k]) * d[k] for k in top)


@pytest.mark.parametrize("top", [0, 3])
def test_the_update_is_the_papers(top):
    s = make("ars", Vector(np.linspace(0.5, 1.5, 7)), population=12, seed=2, sigma=0.05, lr=0.1, top=top, prune=False)
    x, centre = s.ask().copy(), s.centre.copy()
    f = np.random.default_rng(9).standard_normal(12) * 10
    tell(s, 0, f)
    want = centre + expected_step(x, centre, 0.05, f, top or 6, 0.1)
    np.testing.assert_allclose(s.centre, want, rtol=1e-12, atol=1e-14)
    assert not np.allclose(s.centre, centre)


def test_only_the_top_directions_move_the_centre():
    """Changing the returns of directions outside the top b changes nothing (as long as
    they stay outside); changing one inside does."""

    def run(f):
        s = make("ars", Vector(np.ones(5)), population=8, seed=4, top=2, prune=False)
        tell(s, 0, f)
        return s.centre

    f = np.array([5.0, 1.0, 0.0, 0.5, 9.0, -3.0, 2.0, 1.5])  # best sides: 5, 0.5, 9, 2 -> top 2: pairs 2 and 0
    g = f.copy()
    g[[2, 3, 6, 7]] = [-7.0, 1.0, 0.0, -2.0]  # pairs 1 and 3 stay below 5
    assert np.array_equal(run(f), run(g))
    h = f.copy()
    h[0] = 6.0
    assert not np.array_equal(run(f), run(h))


def test_raw_returns_not_ranks():
    """Unlike the rank-shaping strategies, the size of return differences matters: an
    increasing but non-affine transform of the fitness gives a different step."""
    a = make("ars", Vector(np.ones(6)), population=8, seed=5, prune=False)
    b = make("ars", Vector(np.ones(6)), population=8, seed=5, prune=False)
    f = sphere(np.linspace(-1, 1, 6))(a.ask())
    tell(a, 0, f)
    tell(b, 0, np.exp(f))
    assert not np.allclose(a.centre, b.centre)
    c = make("ars", Vector(np.ones(6)), population=8, seed=5, prune=False)
    tell(c, 0, 3.0 * f + 100.0)  # an affine transform: the std scaling cancels it
    np.testing.assert_allclose(c.centre, a.centre, rtol=1e-12)


def test_equal_returns_leave_the_centre_and_non_finite_directions_are_dropped():
    s = make("ars", Vector(np.ones(4)), population=6, prune=False)
    centre = s.centre.copy()
    tell(s, 0, np.full(6, 3.0))
    assert np.array_equal(s.centre, centre) and s.record()["step_norm"] == 0.0

    x, centre = s.ask().copy(), s.centre.copy()
    f = np.array([1.0, -np.inf, 4.0, 2.0, 0.0, 1.0])  # pair 0 has a -inf side: never used
    tell(s, 1, f)
    assert np.all(np.isfinite(s.centre)) and s.record()["directions_used"] == 2.0
    want = centre + expected_step(x[2:], centre, s.sigma, f[2:], 2, s.options["lr"])
    np.testing.assert_allclose(s.centre, want, rtol=1e-12)


def test_finds_the_centre_of_a_sphere():
    """From 5.2 away to within 0.25: the step, scaled by the returns' spread, stays about lr
    long, so the centre jitters near the optimum."""
    target = np.linspace(-1, 1, 10)
    s = make("ars", Vector(np.full(10, 1.5)), population=16, sigma=0.05, lr=0.05, top=4, prune=False)
    start = np.linalg.norm(s.centre - target)
    for g in range(300):
        generation(s, g, sphere(target))
    assert start > 5 and np.linalg.norm(s.centre - target) < 0.25


@pytest.mark.parametrize("hidden", [(), (4,)])
def test_a_linear_policy_and_a_hidden_layer_learn_to_act(hidden):
    """A pruned-mlp with no hidden layer is a linear policy (obs x act weights); with one or
    without, ARS moves its action towards a target action on a fixed observation."""
    space = SpaceInfo(obs_dim=3, act_dim=2, discrete=False, low=-np.ones(2), high=np.ones(2), max_episode_steps=1)
    agent = PrunedMLP(space, hidden, {"init_prune": 0.0})
    assert agent.n_params == (6 if not hidden else 3 * 4 + 4 * 2)
    obs, want = np.array([0.5, -1.0, 2.0]), np.array([0.3, -0.6])

    def fitness(x):
        return np.array([-np.sum((agent.policy(g).act(obs) - want) ** 2) for g in x])

    s = strategy_class("ars")(
        agent, 16, {"sigma": 0.05, "lr": 0.05, "top": 4, "prune": False}, np.random.default_rng(0)
    )
    s.start()
    first = fitness(s.centre[None])[0]
    for g in range(150):
        generation(s, g, fitness)
    assert first < -0.1 and fitness(s.centre[None])[0] > -1e-2
