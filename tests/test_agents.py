"""Both agents: forward pass against a plain re-implementation, traces, pruning."""

import warnings

import numpy as np
import pytest

from synapto.agents import load_agent_class
from synapto.agents.hebbian_dag import HebbianDAG
from synapto.agents.pruned_mlp import PrunedMLP
from synapto.common.errors import UsageError
from synapto.envs import SpaceInfo, make_env
from synapto.evolution.worker.evaluate import evaluate

BOX = SpaceInfo(obs_dim=3, act_dim=2, discrete=False, low=-np.ones(2), high=np.ones(2), max_episode_steps=50)
DISCRETE = SpaceInfo(obs_dim=3, act_dim=4, discrete=True, low=None, high=None, max_episode_steps=50)


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- pruned-mlp
def test_pruned_mlp_forward_matches_plain_matrix_products():
    agent = PrunedMLP(BOX, (4, 5))
    g = rng().standard_normal(agent.n_params)
    w1, w2, w3 = g[:12].reshape(3, 4), g[12:32].reshape(4, 5), g[32:42].reshape(5, 2)
    obs = np.array([0.3, -1.2, 0.7])
    expected = np.tanh(np.tanh(np.tanh(obs @ w1) @ w2) @ w3)
    assert agent.n_params == 42
    np.testing.assert_allclose(agent.policy(g).act(obs), expected, rtol=1e-12)


def test_pruned_mlp_starts_at_one_and_only_prunes():
    agent = PrunedMLP(BOX, (8,))
    g = agent.init_genome(rng())
    assert set(np.unique(g)) <= {0.0, 1.0}
    assert 0.6 < g.mean() < 0.9  # 25 % pruned at random
    child = agent.mutate(g, None, 0.3, rng(1))
    assert np.all((child == 0) | (child == g)) and np.all(child[g == 0] == 0)
    assert np.count_nonzero(child) < np.count_nonzero(g)


def test_pruned_mlp_penalty_is_mean_weight_per_layer():
    agent = PrunedMLP(BOX, (4,))
    g = np.ones(agent.n_params)
    g[:12] = 0  # first layer fully pruned
    assert agent.penalty(g) == pytest.approx(0.5)


def test_pruned_mlp_adaptive_rate_follows_elite_spread_and_is_clipped():
    agent = PrunedMLP(BOX, (4,))
    assert agent.next_rate(0.01, np.array([1000, 1010, 990]), 1000.0) == pytest.approx(np.sqrt(200 / 3) / 1000)
    assert agent.next_rate(0.01, np.array([100, 100]), 100.0) == agent.options["min_rate"]
    assert agent.next_rate(0.01, np.array([10, 200]), 100.0) == agent.options["max_rate"]


def test_discrete_actions_are_argmax_ints():
    for cls in (PrunedMLP, HebbianDAG):
        agent = cls(DISCRETE, (5,))
        pol = agent.policy(agent.init_genome(rng()))
        pol.reset()
        a = pol.act(np.array([0.1, 0.2, 0.3]))
        assert isinstance(a, int) and 0 <= a < 4


def test_box_actions_are_scaled_to_bounds():
    space = SpaceInfo(3, 2, False, np.array([0.0, -2.0]), np.array([10.0, 2.0]), 10)
    agent = PrunedMLP(space, (4,))
    g = rng().standard_normal(agent.n_params) * 3
    a = agent.policy(g).act(np.array([1.0, 2.0, 3.0]))
    raw = PrunedMLP(BOX, (4,)).policy(g).act(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(a, [0.0, -2.0] + (raw + 1) / 2 * np.array([10.0, 4.0]))


# ---------------------------------------------------------------- hebbian-dag
def dag_blocks(sizes, g):
    """The genome's weight matrices read by hand: ``W[i, j]`` from layer ``j`` into layer
    ``i + 1``, in genome order; and a zero trace per matrix."""
    W, off = {}, 0
    for i in range(len(sizes) - 1):
        for j in range(i + 1):
            n = sizes[j] * sizes[i + 1]
            W[i, j] = g[off : off + n].reshape(sizes[j], sizes[i + 1])
            off += n
    return W, {key: np.zeros_like(w) for key, w in W.items()}


def dag_reference(agent: HebbianDAG, g, observations):
    """Nested-loop DAG forward pass and trace accumulation, block by block."""
    sizes = agent.sizes
    L = len(sizes) - 1
    W, H = dag_blocks(sizes, g)
    actions = []
    for obs in observations:
        xs = [np.asarray(obs, float)]
        for i in range(L):
            total = np.zeros(sizes[i + 1])
            for j in range(i + 1):
                c = xs[j] @ W[i, j]
                H[i, j] += np.outer(xs[j], c)
                total += c
            xs.append(np.tanh(total))
        actions.append(np.tanh(xs[-1][1:]))
    stats = np.concatenate([np.abs(H[i, j]).ravel() for i in range(L) for j in range(i + 1)])
    return actions, stats


def test_hebbian_dag_layout_forward_and_traces_match_reference():
    agent = HebbianDAG(BOX, (4, 3))
    assert agent.sizes == [3, 4, 3, 3]
    assert agent.n_params == 3 * 4 + (3 + 4) * 3 + (3 + 4 + 3) * 3
    g = agent.init_genome(rng())
    obs_seq = rng(1).standard_normal((6, 3))
    pol = agent.policy(g)
    pol.reset()
    acts = [pol.act(o) for o in obs_seq]
    pol.end_episode()
    ref_acts, ref_stats = dag_reference(agent, g, obs_seq)
    np.testing.assert_allclose(acts, ref_acts, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pol.trace_stats(), ref_stats, rtol=1e-9, atol=1e-12)


def modulated_reference(agent: HebbianDAG, g, observations, decay=0.0, plastic_pruned=True, trace_norm=False):
    """Nested loops of the neuromodulated DAG: effective weights W + m H with m the
    modulation unit's previous output; H <- (1 - decay) H + outer(pre, contribution),
    kept at 0 on pruned connections unless ``plastic_pruned``; with ``trace_norm`` the
    traces into each target layer are scaled, together, to at most the Frobenius norm of
    that layer's weights after every step."""
    sizes, L = agent.sizes, len(agent.sizes) - 1
    W, H = dag_blocks(sizes, g)
    m, actions = 0.0, []
    for obs in observations:
        xs = [np.asarray(obs, float)]
        for i in range(L):
            total = np.zeros(sizes[i + 1])
            for j in range(i + 1):
                c = xs[j] @ (W[i, j] + m * H[i, j])
                H[i, j] = (1 - decay) * H[i, j] + np.outer(xs[j], c)
                if not plastic_pruned:
                    H[i, j] = H[i, j] * (W[i, j] != 0)
                total += c
            if trace_norm:
                w_norm = np.sqrt(sum(np.sum(W[i, j] ** 2) for j in range(i + 1)))
                h_norm = np.sqrt(sum(np.sum(H[i, j] ** 2) for j in range(i + 1)))
                for j in range(i + 1):
                    H[i, j] = H[i, j] * min(1.0, w_norm / h_norm) if h_norm > 0 else H[i, j]
            xs.append(np.tanh(total))
        m = xs[-1][0]
        actions.append(np.tanh(xs[-1][1:]))
    stats = np.concatenate([np.abs(H[i, j]).ravel() for i in range(L) for j in range(i + 1)])
    return actions, stats


@pytest.mark.parametrize("decay,plastic_pruned", [(0.0, True), (0.1, False), (0.3, True)])
def test_neuromodulated_dag_with_trace_decay_and_pruned_connections(decay, plastic_pruned):
    """The neuromodulated update against nested loops; with plastic_pruned false a pruned
    connection's trace stays 0 (it carries nothing), with true it does not (the reference)."""
    agent = HebbianDAG(BOX, (4,), {"neuromodulate": True, "trace_decay": decay, "plastic_pruned": plastic_pruned})
    g = agent.init_genome(rng()) * (rng(5).random(agent.n_params) > 0.3)
    obs_seq = rng(1).standard_normal((12, 3))
    pol = agent.policy(g)
    pol.reset()
    acts = [pol.act(o) for o in obs_seq]
    pol.end_episode()
    ref_acts, ref_stats = modulated_reference(agent, g, obs_seq, decay, plastic_pruned)
    np.testing.assert_allclose(acts, ref_acts, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pol.trace_stats(), ref_stats, rtol=1e-9, atol=1e-12)
    assert np.all(pol.trace_stats()[g == 0] == 0) != plastic_pruned


@pytest.mark.parametrize("decay,plastic_pruned", [(0.0, True), (0.05, False)])
def test_normalised_traces_follow_the_reference_and_stay_bounded(decay, plastic_pruned):
    """trace_norm: the update against nested loops, and over a long episode of large
    inputs (where the plain update overflows) every layer's trace stays within the norm
    of its weights and the actions stay finite."""
    options = {"neuromodulate": True, "trace_decay": decay, "plastic_pruned": plastic_pruned, "trace_norm": True}
    agent = HebbianDAG(BOX, (4,), options)
    g = agent.init_genome(rng()) * (rng(5).random(agent.n_params) > 0.3)
    obs_seq = rng(1).standard_normal((12, 3))
    pol = agent.policy(g)
    pol.reset()
    acts = [pol.act(o) for o in obs_seq]
    pol.end_episode()
    ref_acts, ref_stats = modulated_reference(agent, g, obs_seq, decay, plastic_pruned, trace_norm=True)
    np.testing.assert_allclose(acts, ref_acts, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pol.trace_stats(), ref_stats, rtol=1e-9, atol=1e-12)
    big = np.full(agent.n_params, 3.0)
    long_obs = 10 * rng(2).standard_normal((1600, 3))
    for norm, bounded in ((True, True), (False, False)):
        pol = HebbianDAG(BOX, (4,), {**options, "trace_norm": norm}).policy(big)
        pol.reset()
        with np.errstate(all="ignore"):
            acts = np.array([pol.act(o) for o in long_obs])
        within = all(np.linalg.norm(h) <= np.linalg.norm(w) * (1 + 1e-12) for h, w in zip(pol._traces, pol.mats))
        assert within == bounded and np.all(np.isfinite(acts)) == bounded


@pytest.mark.parametrize(
    "options",
    [{"trace_decay": 1.0}, {"trace_decay": -0.1}, {"plastic_pruned": "no"}, {"trace_norm": 1}, {"trace_norm": "yes"}],
)
def test_bad_plasticity_options_are_refused(options):
    with pytest.raises(UsageError, match=next(iter(options))):
        HebbianDAG(BOX, (4,), options)


@pytest.mark.parametrize(
    "cls, options, says",
    [
        (HebbianDAG, {"neuromodulate": "no"}, "neuromodulate must be true or false, got 'no'"),
        (HebbianDAG, {"neuromodulate": "false"}, "neuromodulate must be true or false, got 'false'"),
        (HebbianDAG, {"neuromodulate": 1}, "neuromodulate must be true or false, got 1"),
        (HebbianDAG, {"random_prune": 5}, r"random_prune must be in \[0, 1\), got 5"),
        (HebbianDAG, {"init_prune": 1.0}, r"init_prune must be in \[0, 1\), got 1.0"),
        (HebbianDAG, {"prune_rate": float("nan")}, "prune_rate must be a finite number, got nan"),
        (HebbianDAG, {"prune_rate": 1.5}, r"prune_rate must be in \[0, 1\], got 1.5"),
        (PrunedMLP, {"init_prune": "abc"}, "init_prune must be a finite number, got 'abc'"),
        (PrunedMLP, {"init_prune": 1.5}, r"init_prune must be in \[0, 1\), got 1.5"),
        (PrunedMLP, {"init_prune": True}, "init_prune must be a finite number, got True"),
        (PrunedMLP, {"max_rate": -1}, r"max_rate must be in \[0, 1\], got -1"),
        (PrunedMLP, {"min_rate": 0.5}, r"min_rate must not exceed max_rate \(0.0125\), got 0.5"),
    ],
)
def test_agent_options_of_a_wrong_type_or_range_are_refused(cls, options, says):
    """A word is no boolean (``neuromodulate = "no"`` would be a true value) and a
    fraction pruned lies in [0, 1) (1.5 pruned every connection)."""
    with pytest.raises(UsageError, match=f"^agent option {says}"):
        cls(BOX, (4,), options)


@pytest.mark.parametrize(
    "cls, options",
    [
        (HebbianDAG, {"neuromodulate": True, "init_prune": 0, "random_prune": 0.0}),
        (PrunedMLP, {"init_prune": 0, "min_rate": 0, "max_rate": 1}),
    ],
)
def test_agent_options_at_their_bounds_are_taken(cls, options):
    assert cls(BOX, (4,), options).options == {**cls.OPTIONS, **options}


def test_hebbian_traces_reset_every_episode():
    agent = HebbianDAG(BOX, (4,))
    g = agent.init_genome(rng())
    a, b = rng(2).standard_normal((5, 3)), rng(3).standard_normal((7, 3))
    pol = agent.policy(g)
    for episode in (a, b):
        pol.reset()
        for o in episode:
            pol.act(o)
        pol.end_episode()
    _, sa = dag_reference(agent, g, a)
    _, sb = dag_reference(agent, g, b)
    # mean over episodes of per-episode traces: nothing leaks from episode a into b
    np.testing.assert_allclose(pol.trace_stats(), (sa + sb) / 2, rtol=1e-9, atol=1e-12)


def test_hebbian_pruning_probabilities_follow_traces():
    agent = HebbianDAG(BOX, (4,))
    g = np.ones(agent.n_params)
    g[0] = 0.0  # a pruned connection: never pruned again, takes no budget
    stats = rng(4).uniform(0, 3, agent.n_params)
    p = agent.prune_probabilities(g, stats, 0.01)
    assert p[0] == 0
    for group in agent.groups():
        for s in group:
            alive = np.flatnonzero(g[s]) + s.start
            z = np.exp(-stats[alive])
            np.testing.assert_allclose(p[alive], z / z.sum() * 0.01 * alive.size)
            # weaker activity -> more likely pruned
            order = np.argsort(stats[alive])
            assert np.all(np.diff(p[alive][order]) <= 0)
    assert not np.allclose(p[1:], p[1])  # not uniform


def test_hebbian_mutation_prunes_weak_connections_more_often():
    agent = HebbianDAG(BOX, (4,), {"random_prune": 0.0, "prune_rate": 0.2})
    g = np.ones(agent.n_params)
    stats = np.where(np.arange(agent.n_params) % 2 == 0, 0.0, 2.0)  # even: weak, odd: strong
    r = rng(5)
    pruned = np.zeros(agent.n_params)
    for _ in range(400):
        pruned += agent.mutate(g, stats, 0.2, r) == 0
    weak, strong = pruned[::2].sum(), pruned[1::2].sum()
    assert weak > 3 * strong  # softmax(-stat): exp(2) ~ 7.4 times more likely


def test_hebbian_mutation_never_revives():
    agent = HebbianDAG(BOX, (6, 6))
    g = agent.init_genome(rng())
    child = agent.mutate(g, np.abs(rng(1).standard_normal(agent.n_params)), 0.05, rng(2))
    assert np.all(child[g == 0] == 0) and np.all((child == 0) | (child == g))


def test_agents_work_in_a_real_env_and_return_traces():
    space = SpaceInfo.of(make_env("CartPole-v1"))
    for cls in (PrunedMLP, HebbianDAG):
        agent = cls(space, (4,))
        r = evaluate(agent, lambda: make_env("CartPole-v1"), agent.init_genome(rng()), [1, 2])
        assert r.steps.min() >= 1 and np.isfinite(r.fitness)
        if cls is HebbianDAG:
            assert r.stats.shape == (agent.n_params,) and r.stats.max() > 0


def test_episode_result_does_not_depend_on_history():
    # Box2D keeps state across reset(): a fresh env per episode makes each episode's
    # return a pure function of (genome, seed), whatever ran before it.
    def factory():
        return make_env("BipedalWalker-v3")

    agent = HebbianDAG(SpaceInfo.of(factory()), (4,))
    g = agent.init_genome(rng())
    alone = evaluate(agent, factory, g, [5])
    after = evaluate(agent, factory, g, [7, 9, 5])
    assert alone.returns[0] == after.returns[2]


def test_nonfinite_action_gives_minus_inf_fitness():
    agent = PrunedMLP(SpaceInfo.of(make_env("Pendulum-v1")), (4,))
    g = np.ones(agent.n_params)
    g[0] = np.nan
    r = evaluate(agent, lambda: make_env("Pendulum-v1"), g, [1, 2])
    assert r.nonfinite and r.fitness == -np.inf


def test_agent_loading_errors():
    assert load_agent_class("pruned-mlp") is PrunedMLP
    assert load_agent_class("synapto.agents.hebbian_dag:HebbianDAG") is HebbianDAG
    for bad in ("nope", "no_such_module:Agent", "synapto.agents.hebbian_dag:Missing", "numpy:ndarray"):
        with pytest.raises(UsageError):
            load_agent_class(bad)
    with pytest.raises(UsageError):
        HebbianDAG(BOX, (4, 0))
    with pytest.raises(UsageError):
        HebbianDAG(BOX, (4,), {"no_such_option": 1})


def test_an_overflowing_policy_gives_minus_inf_fitness_without_numpy_warnings():
    """The reference's neuromodulated update (a trace summed over the episode) feeds back
    through W + m H and can overflow: that is fitness -inf, counted as non-finite, and no
    warning from numpy on every step of every worker."""
    agent = HebbianDAG(SpaceInfo.of(make_env("Pendulum-v1")), (4,), {"neuromodulate": True})
    g = np.full(agent.n_params, 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = evaluate(agent, lambda: make_env("Pendulum-v1"), g, [1, 2])
    assert r.nonfinite and r.fitness == -np.inf and r.steps[0] < 200
