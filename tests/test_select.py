"""The evolution update on the coordinator."""

import numpy as np

from synapto.agents.hebbian_dag import HebbianDAG
from synapto.agents.pruned_mlp import PrunedMLP
from synapto.envs import SpaceInfo
from synapto.evolution.strategies.ga import EvolutionState, next_generation, rank_order
from synapto.evolution.strategies.ga_operators import rank_weights, recombine
from synapto.evolution.strategies.hall import HallOfFame

BOX = SpaceInfo(obs_dim=3, act_dim=2, discrete=False, low=-np.ones(2), high=np.ones(2), max_episode_steps=50)


def make_state(agent, P=16, seed=0):
    k = -(-P // 8)
    return EvolutionState.initial(agent, P, k, np.random.default_rng(seed)), k


def step(state, agent, k, fitness, stats=None):
    stats = np.zeros_like(state.genomes) if stats is None else stats
    conn = np.count_nonzero(state.genomes, axis=1)
    next_generation(state, np.asarray(fitness, float), stats, agent, k, conn)


def test_rank_order_descending_with_index_ties():
    assert rank_order(np.array([1.0, 3.0, 3.0, -np.inf, 2.0])).tolist() == [1, 2, 4, 0, 3]


def test_rank_weights():
    np.testing.assert_allclose(rank_weights(3), [3 / 6, 2 / 6, 1 / 6])


def test_elites_best_ever_and_size():
    agent = HebbianDAG(BOX, (4,))
    state, k = make_state(agent, P=16)
    before = state.genomes.copy()
    fitness = np.arange(16.0)  # individual 15 is best, then 14
    step(state, agent, k, fitness)
    assert state.genomes.shape == before.shape and state.generation == 1
    assert state.best_fitness == 15.0 and state.best_generation == 0
    np.testing.assert_array_equal(state.genomes[0], before[15])  # best-ever, unchanged
    np.testing.assert_array_equal(state.genomes[1], before[15])  # this generation's top k-1
    # best-ever survives a worse generation
    step(state, agent, k, np.zeros(16))
    assert state.best_fitness == 15.0
    np.testing.assert_array_equal(state.genomes[0], before[15])


def test_hall_of_fame_keeps_the_best_seen():
    hof = HallOfFame(np.array([9.0, 5.0]), np.array([[9.0], [5.0]]), np.full(2, -1))
    fitness = np.array([1.0, 7.0, 3.0])
    top = rank_order(fitness)[:2]
    hof.add(fitness[top], fitness[top, None], 0)
    assert hof.fitness.tolist() == [9.0, 7.0] and hof.genomes[:, 0].tolist() == [9.0, 7.0]


def test_offspring_never_revive_pruned_connections():
    agent = HebbianDAG(BOX, (4,))
    state, k = make_state(agent, P=16)
    rng = np.random.default_rng(3)
    pruned_everywhere = np.all(state.genomes == 0, axis=0)
    for _ in range(5):
        step(state, agent, k, rng.standard_normal(16), np.abs(rng.standard_normal(state.genomes.shape)))
    assert np.all(state.genomes[:, pruned_everywhere] == 0)
    # weights only ever come from ancestors: every value existed in generation 0
    assert np.isin(
        state.genomes[state.genomes != 0], EvolutionState.initial(agent, 16, k, np.random.default_rng(0)).genomes
    ).all()


def test_update_is_deterministic_given_the_generator():
    agent = PrunedMLP(BOX, (4,))
    a, k = make_state(agent, seed=7)
    b, _ = make_state(agent, seed=7)
    f = np.random.default_rng(1).standard_normal(16)
    step(a, agent, k, f)
    step(b, agent, k, f)
    np.testing.assert_array_equal(a.genomes, b.genomes)
    assert a.rng.bit_generator.state == b.rng.bit_generator.state


def test_recombination_swaps_whole_blocks_with_their_stats():
    agent = HebbianDAG(BOX, (4,))
    P = 6
    children = np.repeat(np.arange(P, dtype=float)[:, None], agent.n_params, axis=1)
    stats = children + 100
    recombine(children, stats, agent.groups(), 20, 1, np.random.default_rng(0))
    assert np.all(children[0] == 0)  # rows below lo untouched
    np.testing.assert_array_equal(stats, children + 100)  # stats follow the genes
    for group in agent.groups():
        for s in group:  # each matrix comes whole from one parent
            assert np.all(children[:, s] == children[:, s][:, :1])
    assert not np.all(children == np.arange(P)[:, None])  # something moved
    # the multiset of blocks is preserved
    np.testing.assert_array_equal(
        np.sort(children, axis=0),
        np.sort(np.repeat(np.arange(P, dtype=float)[:, None], agent.n_params, axis=1), axis=0),
    )


def test_pruning_uses_parent_trace_statistics():
    agent = HebbianDAG(BOX, (4,), {"random_prune": 0.0, "prune_rate": 0.3})
    P = 16
    state, k = make_state(agent, P=P)
    state.genomes[:] = 1.0
    state.rate = 0.3
    n = agent.n_params
    weak = np.arange(n) % 2 == 0  # weak and strong connections in every block
    stats = np.tile(np.where(weak, 0.0, 5.0), (P, 1))
    step(state, agent, k, np.arange(P, dtype=float), stats)
    pruned = state.genomes[k:] == 0
    assert pruned[:, weak].sum() > 5 * max(pruned[:, ~weak].sum(), 1)
