"""The distribution strategies (openai-es, pgpe, cmaes, ars) through ask / tell: they find the
optimum of analytic functions, resume bit for bit, never revive a pruned connection,
sample mirrored pairs, shape fitness by centred ranks, and refuse bad options."""

import numpy as np
import pytest

from synapto.agents.hebbian_dag import HebbianDAG
from synapto.agents.pruned_mlp import PrunedMLP
from synapto.common.errors import UsageError
from synapto.envs import SpaceInfo, make_env
from synapto.evolution.strategies.base import Feedback, check_never_revived, strategy_class
from synapto.evolution.strategies.es import centred_ranks
from synapto.evolution.worker.evaluate import evaluate
from synapto.store import read_checkpoint, write_checkpoint

ES = ("openai-es", "pgpe", "cmaes")  #: the strategies that shape fitness by ranks
CENTRE = (*ES, "ars")  #: every strategy searching around a centre
BOX = SpaceInfo(obs_dim=3, act_dim=2, discrete=False, low=-np.ones(2), high=np.ones(2), max_episode_steps=50)


class Vector:
    """A fake agent: the genome is the point searched; it starts at ``start`` (zeros
    there are pruned connections) and prunes surviving coordinates uniformly."""

    def __init__(self, start, rate=0.01):
        self.start = np.asarray(start, dtype=np.float64)
        self.n_params = self.start.size
        self.initial_rate = rate
        self.rates_seen = []

    def init_genome(self, rng):
        return self.start.copy()

    def mutate(self, genome, stats, rate, rng):
        return genome * (rng.random(genome.size) >= rate)

    def next_rate(self, rate, elite_connections, mean_connections):
        self.rates_seen.append(rate)
        return rate

    def connections(self, genome):
        return int(np.count_nonzero(genome))


def make(name, agent, population=16, seed=0, **options):
    """Strategy ``name`` started on ``agent``; a centre strategy starts from the agent's own
    initial genome (``init_std=0``) unless told otherwise, so the tests know where it starts."""
    if name != "ga":
        options.setdefault("init_std", 0.0)
    s = strategy_class(name)(agent, population, options, np.random.default_rng(seed))
    s.start()
    return s


def generation(s, g, fitness_fn, k=0, stats=None):
    """One generation of the coordinator's protocol: ask, fitness, candidates, validation, tell."""
    x = s.ask()
    f = fitness_fn(x)
    cand = s.candidates(f, k)
    vf = fitness_fn(cand.genomes) if k else np.zeros(0)
    st = np.zeros_like(x) if stats is None else stats(x)
    s.tell(Feedback(g, f, st, np.count_nonzero(x, axis=1), cand, vf))
    return x


def sphere(target):
    return lambda x: -np.sum((x - target) ** 2, axis=1)


def rosenbrock(x):
    return -np.sum((1 - x[:, :-1]) ** 2 + 100 * (x[:, 1:] - x[:, :-1] ** 2) ** 2, axis=1)


# ---------------------------------------------------------------- optima
SETTINGS = {  # (options, tolerance) on a 10-dimensional sphere, 150 generations of 16
    # Adam's and ClipUp's fixed step sizes leave the centre jittering near the optimum
    "openai-es": (dict(sigma=0.1, sigma_decay=0.95, sigma_min=0.001, lr=0.03, weight_decay=0.0), 0.1),
    "pgpe": (dict(sigma=0.2, max_speed=0.05), 0.2),
    "cmaes": (dict(sigma=0.5), 1e-4),
    "cmaes-separable": (dict(sigma=0.5, separable=True), 1e-4),
}


@pytest.mark.parametrize("variant", SETTINGS)
@pytest.mark.parametrize("shift", [0.0, 0.7])
def test_finds_the_centre_of_a_sphere(variant, shift):
    """Sphere and shifted sphere: the centre ends near the optimum (it starts 2.6 or 3.2 away)."""
    name = variant.split("-separable")[0]
    options, tolerance = SETTINGS[variant]
    target = np.linspace(-1, 1, 10) + shift
    s = make(name, Vector(np.full(10, 1.5)), prune=False, **options)
    start = np.linalg.norm(s.centre - target)
    for g in range(150):
        generation(s, g, sphere(target))
    assert start > 2.5
    assert np.linalg.norm(s.centre - target) < tolerance


def test_cmaes_solves_rosenbrock():
    """Full CMA-ES learns the curved valley of 6-D Rosenbrock (the separable one does not in this budget)."""
    s = make("cmaes", Vector(np.full(6, 0.5)), population=10, prune=False, sigma=0.3, separable=False)
    for g in range(400):
        generation(s, g, rosenbrock)
    assert -rosenbrock(s.centre[None])[0] < 1e-8
    np.testing.assert_allclose(s.centre, 1.0, atol=1e-4)


@pytest.mark.parametrize("separable", [False, True])
def test_cmaes_learns_an_ill_conditioned_ellipsoid(separable):
    """Axis scales 1..1e4 in 10-D with 32 samples: the covariance learns them (the
    rank-mu update does most of it at this population) and the centre reaches 1e-10."""
    scale = 10 ** (4 * np.arange(10) / 9)
    s = make("cmaes", Vector(np.ones(10)), population=32, prune=False, sigma=0.5, separable=separable)
    for g in range(240):
        generation(s, g, lambda x: -np.sum(scale * x * x, axis=1))
    assert np.sum(scale * s.centre**2) < 1e-10
    cov = s.state()[0]["cov"]
    diag = cov if separable else np.diag(cov)
    assert diag[0] / diag[-1] > 1e3  # C is close to the inverse Hessian up to scale


def test_cmaes_separable_option():
    """ "auto" is diagonal above SEPARABLE_ABOVE weights only; true / false force it."""
    from synapto.evolution.strategies.cmaes import SEPARABLE_ABOVE

    for n, option, diagonal in [
        (10, "auto", False),
        (SEPARABLE_ABOVE + 1, "auto", True),
        (10, True, True),
        (SEPARABLE_ABOVE + 1, False, False),
    ]:
        s = make("cmaes", Vector(np.ones(n)), population=6, separable=option)
        assert s.state()[0]["cov"].ndim == (1 if diagonal else 2)


def test_pgpe_clipup_steps():
    """ClipUp: the first step is the normalised gradient times step_size (default
    max_speed / 2), no step is longer than max_speed, and momentum reaches it."""
    s = make("pgpe", Vector(np.full(8, 5.0)), population=8, prune=False, sigma=0.1, max_speed=0.2)
    lengths = []
    for g in range(15):
        before = s.centre.copy()
        generation(s, g, sphere(0.0))
        lengths.append(np.linalg.norm(s.centre - before))
    assert lengths[0] == pytest.approx(0.1, rel=1e-12)
    assert max(lengths) <= 0.2 * (1 + 1e-12) and lengths[-1] == pytest.approx(0.2, rel=1e-12)


def test_pgpe_sigma_adapts_within_its_bound():
    """Centred on a sphere's optimum, the standard deviations shrink, by at most the
    fraction sigma_max_change per generation."""
    s = make(
        "pgpe", Vector(np.full(6, 0.5)), population=32, prune=False, sigma=0.3, max_speed=1e-6, sigma_max_change=0.1
    )
    sigma = s.state()[0]["sigma"]
    for g in range(40):
        generation(s, g, sphere(0.5))
        new = s.state()[0]["sigma"]
        assert np.all(new >= 0.9 * sigma * (1 - 1e-12)) and np.all(new <= 1.1 * sigma * (1 + 1e-12))
        sigma = new
    assert np.all(sigma < 0.2)  # from 0.3


def test_openai_es_reaches_the_analytic_env_optimum_with_a_real_agent():
    """pruned-mlp on the one-step analytic env, fitness from synapto's own rollouts: the
    return of the champion approaches the optimum 0 (about -0.6 at the start)."""
    import analytic_env  # registers Analytic-v0

    env = make_env("analytic_env:Analytic-v0")
    agent = PrunedMLP(SpaceInfo.of(env), (4,))
    env.close()
    seeds = np.array([1])

    def fitness(x):
        return np.array(
            [evaluate(agent, lambda: make_env("analytic_env:Analytic-v0"), g, seeds, False).returns[0] for g in x]
        )

    s = make("openai-es", agent, population=16, init_std=0.5, sigma=0.05, lr=0.05, weight_decay=0.0, prune=False)
    first = fitness(s.centre[None])[0]
    for g in range(60):
        generation(s, g, fitness, k=2)
    assert first < -0.05
    assert s.champion.fitness > -1e-3 and fitness(s.champion.genome[None])[0] > -1e-3
    action = agent.policy(s.champion.genome).act(analytic_env.OBS)
    assert fitness(s.champion.genome[None])[0] == analytic_env.analytic_return(action)


# ---------------------------------------------------------------- resume
@pytest.mark.parametrize("variant", ["openai-es", "pgpe", "cmaes", "cmaes-separable", "ars"])
def test_state_round_trip_continues_bit_for_bit(variant, tmp_path):
    """N generations straight == K generations, state() and the Generator through a
    checkpoint file into a new instance, N - K more: the same genomes and the same
    state at every step, the same champion."""
    name = variant.split("-separable")[0]
    opts = dict(prune=True, prune_every=2, init_std=0.5, **({"separable": True} if "separable" in variant else {}))
    start = np.where(np.arange(12) % 5 == 0, 0.0, 1.0)
    target = np.linspace(-1, 1, 12)
    stats = np.abs
    N, K = 9, 4

    straight = make(name, Vector(start, rate=0.2), population=8, seed=3, **opts)
    asked, states = [], []
    for g in range(N):
        asked.append(generation(straight, g, sphere(target), k=3, stats=stats).copy())
        states.append(straight.state())

    first = make(name, Vector(start, rate=0.2), population=8, seed=3, **opts)
    for g in range(K):
        assert np.array_equal(generation(first, g, sphere(target), k=3, stats=stats), asked[g])
    arrays, scalars = first.state()
    write_checkpoint(tmp_path / "run.h5", arrays, scalars, first.rng, "{}")
    del first
    checkpoint = read_checkpoint(tmp_path / "run.h5")
    resumed = strategy_class(name)(Vector(start, rate=0.2), 8, opts, checkpoint.rng)
    resumed.restore(checkpoint.arrays, checkpoint.scalars)
    for g in range(K, N):
        assert np.array_equal(generation(resumed, g, sphere(target), k=3, stats=stats), asked[g]), g
        arrays, scalars = resumed.state()
        assert scalars == states[g][1]
        assert sorted(arrays) == sorted(states[g][0])
        assert all(np.array_equal(arrays[k], states[g][0][k]) for k in arrays), g
    assert np.array_equal(resumed.ask(), straight.ask())
    assert np.array_equal(resumed.champion.genome, straight.champion.genome)

    def final(s):  # NaN fitness (the last centre) compared by its bits
        return [(c.genome.tobytes(), np.float64(c.fitness).tobytes(), c.generation) for c in s.final_candidates()]

    assert final(resumed) == final(straight)
    assert resumed.record() == straight.record()
    assert np.count_nonzero(straight.centre) < np.count_nonzero(start)  # pruning happened


@pytest.mark.parametrize("name", CENTRE)
def test_ask_repeats_the_same_genomes_and_draws_nothing(name):
    s = make(name, Vector(np.ones(6)), population=8)
    before = s.rng.bit_generator.state
    a, b = s.ask().copy(), s.ask()
    assert np.array_equal(a, b) and s.rng.bit_generator.state == before
    generation(s, 0, sphere(0.0))
    assert not np.array_equal(s.ask(), a)


# ---------------------------------------------------------------- synaptolysis
@pytest.mark.parametrize("variant", ["openai-es", "pgpe", "cmaes", "cmaes-separable", "ars"])
@pytest.mark.parametrize("agent_name", ["pruned-mlp", "hebbian-dag"])
def test_pruned_connections_never_revive(variant, agent_name):
    """Real agents pruning the centre every generation: every zero of the centre stays 0
    in every later centre and in every genome asked for; the optimiser state of pruned
    coordinates is zero."""
    name = variant.split("-separable")[0]
    if agent_name == "pruned-mlp":
        agent = PrunedMLP(BOX, (6,), {"min_rate": 0.05, "max_rate": 0.05})
    else:
        agent = HebbianDAG(BOX, (4,), {"prune_rate": 0.05, "random_prune": 0.05, "init_prune": 0.2})
    opts = dict(prune=True, prune_every=1, init_std=1.0, **({"separable": True} if "separable" in variant else {}))
    s = make(name, agent, population=8, **opts)
    initial = s.centre.copy()
    assert np.count_nonzero(initial) < agent.n_params  # the agent's initial pruning
    zeros = s.centre.copy()
    for g in range(12):
        x = generation(s, g, sphere(0.3), k=2, stats=np.abs)
        assert check_never_revived(zeros, x)
        assert check_never_revived(zeros, s.centre)
        assert check_never_revived(s.centre, s.ask())
        zeros = s.centre.copy()
        dead = s.centre == 0
        arrays, _ = s.state()
        for key, value in arrays.items():
            if key in ("adam_m", "adam_v", "sigma", "velocity", "ps", "pc", "noise"):
                assert np.all(value[..., dead] == 0), key
            if key == "cov":
                assert np.all(value[dead] == 0) and (value.ndim == 1 or np.all(value[:, dead] == 0))
    assert np.count_nonzero(s.centre) < 0.75 * np.count_nonzero(initial)


def test_pruning_schedule_and_hebbian_statistics():
    """prune_every: the agent prunes the centre only every k generations, given the
    population's mean trace statistics; prune=false never prunes."""
    seen = []

    class Recording(Vector):
        def mutate(self, genome, stats, rate, rng):
            seen.append(stats.copy())
            return super().mutate(genome, stats, rate, rng)

    s = make("openai-es", Recording(np.ones(5), rate=0.0), population=4, prune_every=3)

    def stats(x):  # row i is 0, 1, ..., 4 plus i
        return np.tile(np.arange(5.0), (x.shape[0], 1)) + np.arange(x.shape[0])[:, None]

    for g in range(7):
        generation(s, g, sphere(0.0), stats=stats)
    assert len(seen) == 2  # after generations 2 and 5
    np.testing.assert_array_equal(seen[0], np.arange(5.0) + 1.5)  # mean over the population's rows
    s = make("openai-es", Recording(np.ones(5)), population=4, prune=False, prune_every=1)
    for g in range(4):
        generation(s, g, sphere(0.0))
    assert len(seen) == 2


# ---------------------------------------------------------------- sampling and shaping
@pytest.mark.parametrize("name", ["openai-es", "pgpe", "ars"])
def test_mirrored_pairs_are_exact_mirrors(name):
    s = make(name, Vector(np.r_[np.linspace(0.1, 1, 7), 0.0]), population=10, init_std=0.0)
    generation(s, 0, sphere(0.2))
    x, c = s.ask(), s.centre
    plus, minus = x[0::2] - c, x[1::2] - c
    np.testing.assert_allclose(plus, -minus, rtol=0, atol=1e-15)
    assert np.all(np.abs(plus[:, :7]) > 0) and np.all(x[:, 7] == 0)
    assert np.unique(np.round(plus, 12), axis=0).shape[0] == 5  # five different pairs


def test_openai_es_pgpe_and_ars_refuse_an_odd_population():
    for name in ("openai-es", "pgpe", "ars"):
        with pytest.raises(UsageError, match="even population") as exc:
            strategy_class(name)(Vector(np.ones(3)), 7, {}, np.random.default_rng(0))
        assert "\n" not in str(exc.value)


def test_centred_ranks():
    np.testing.assert_array_equal(centred_ranks(np.array([3.0, -1.0, 10.0, 0.0, 7.0])), [0.0, -0.5, 0.5, -0.25, 0.25])
    # ties share their mean rank; -inf and NaN are the worst
    np.testing.assert_array_equal(
        centred_ranks(np.array([1.0, 1.0, -np.inf, 5.0, np.nan])), [0.125, 0.125, -0.375, 0.5, -0.375]
    )
    u = centred_ranks(np.random.default_rng(0).standard_normal(33))
    assert abs(u.sum()) < 1e-12 and u.min() == -0.5 and u.max() == 0.5


@pytest.mark.parametrize("name", ES)
def test_only_the_order_of_the_fitness_matters(name):
    """Fitness shaping by ranks (CMA-ES: selection by rank): a strictly increasing
    transform of the fitness gives the same genomes bit for bit."""
    target = np.linspace(-1, 1, 6)
    a = make(name, Vector(np.ones(6)), population=8, seed=5, prune=False)
    b = make(name, Vector(np.ones(6)), population=8, seed=5, prune=False)
    for g in range(10):
        xa = generation(a, g, sphere(target))
        xb = generation(b, g, lambda x: np.exp(sphere(target)(x)) * 3 + 100)
        assert np.array_equal(xa, xb)


# ---------------------------------------------------------------- candidates and champion
@pytest.mark.parametrize("name", CENTRE)
def test_candidates_champion_and_final_candidates(name):
    s = make(name, Vector(np.ones(4)), population=6)
    x = s.ask()
    f = np.array([0.0, 5.0, 1.0, 9.0, 2.0, 3.0])
    cand = s.candidates(f, 3)
    assert cand.individual.tolist() == [-1, 3, 1]
    assert np.array_equal(cand.genomes, np.stack([s.centre, x[3], x[1]]))
    assert s.candidates(f, 0).genomes.shape == (0, 4)
    centre = s.centre.copy()
    s.tell(Feedback(0, f, np.zeros_like(x), np.full(6, 4), cand, np.array([7.0, 8.0, 2.0])))
    assert np.array_equal(s.champion.genome, x[3]) and s.champion.fitness == 8.0 and s.champion.generation == 0
    final = s.final_candidates()
    assert np.array_equal(np.stack([c.genome for c in final]), np.stack([x[3], centre, x[1], s.centre]))
    assert [c.generation for c in final] == [0, 0, 0, 1]  # the last centre: the generation it would run in
    assert [c.fitness for c in final[:3]] == [8.0, 7.0, 2.0] and np.isnan(final[3].fitness)


@pytest.mark.parametrize("name", CENTRE)
def test_champion_without_validation_is_the_centre(name):
    s = make(name, Vector(np.ones(4)), population=6)
    assert s.champion.generation == -1 and s.champion.fitness == -np.inf
    f = np.arange(6.0)
    generation(s, 0, lambda x: f)
    assert np.array_equal(s.champion.genome, s.centre) and s.champion.fitness == 2.5
    assert np.array_equal(np.stack([c.genome for c in s.final_candidates()]), s.centre[None])


@pytest.mark.parametrize("name", CENTRE)
def test_record(name):
    s = make(name, Vector(np.ones(4)), population=6)
    generation(s, 0, sphere(0.0))
    rec = s.record()
    assert {"prune_rate", "sigma_mean"} <= set(rec) and all(isinstance(v, float) for v in rec.values())
    assert [(k, v.shape) for k, v in s.record_arrays().items()] == [("centre", (4,))]


# ---------------------------------------------------------------- options
BAD = [
    ("openai-es", {"sigma": 0}),
    ("openai-es", {"sigma": -0.1}),
    ("openai-es", {"sigma": "big"}),
    ("openai-es", {"sigma": True}),
    ("openai-es", {"lr": 0.0}),
    ("openai-es", {"lr": float("inf")}),
    ("openai-es", {"beta1": 1.0}),
    ("openai-es", {"weight_decay": -1}),
    ("openai-es", {"sigma_decay": 1.5}),
    ("pgpe", {"sigma": 0}),
    ("pgpe", {"max_speed": -1}),
    ("pgpe", {"sigma_max_change": 1.0}),
    ("pgpe", {"momentum": "high"}),
    ("cmaes", {"sigma": float("nan")}),
    ("cmaes", {"separable": "maybe"}),
    ("cmaes", {"prune": "yes"}),
    ("pgpe", {"prune_every": 0}),
    ("openai-es", {"prune_every": 2.5}),
    ("cmaes", {"init_std": -1}),
    ("openai-es", {"lerning_rate": 0.1}),
    ("ars", {"sigma": 0}),
    ("ars", {"lr": -0.02}),
    ("ars", {"top": -1}),
    ("ars", {"top": 2.5}),
    ("ars", {"top": 5}),
    ("ars", {"prune_every": 0}),
    ("ars", {"init_std": "small"}),
]


@pytest.mark.parametrize("name,options", BAD, ids=[f"{n}-{next(iter(o))}" for n, o in BAD])
def test_bad_options_are_refused_in_one_line(name, options):
    with pytest.raises(UsageError) as exc:
        strategy_class(name)(Vector(np.ones(3)), 8, options, np.random.default_rng(0))
    assert "\n" not in str(exc.value) and next(iter(options)) in str(exc.value)


@pytest.mark.parametrize(
    "name,population", [("openai-es", 0), ("pgpe", 1), ("cmaes", 1), ("cmaes", 3), ("ars", 0), ("ars", 5)]
)
def test_too_small_populations_are_refused(name, population):
    with pytest.raises(UsageError, match="population") as exc:
        strategy_class(name)(Vector(np.ones(3)), population, {}, np.random.default_rng(0))
    assert "\n" not in str(exc.value)


def test_defaults_are_accepted_and_documented():
    for name in CENTRE:
        cls = strategy_class(name)
        assert cls.name == name
        assert all(o.help for o in cls.OPTIONS.values())
        assert cls.check_options({}) == {k: o.default for k, o in cls.OPTIONS.items()}
