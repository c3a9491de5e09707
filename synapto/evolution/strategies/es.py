"""What the distribution-based strategies (``openai-es``, ``pgpe``, ``cmaes``) share.

Each of them searches around one *centre* genome.  :class:`CentreStrategy` holds
everything that is not the search distribution itself:

- **The population is drawn when a generation is set up** -- in :meth:`start` and at
  the end of :meth:`tell` -- from the run's Generator, and kept (with the noise it
  came from) until the next :meth:`tell`: :meth:`ask` draws nothing and returns the
  same genomes however often it is called, and the checkpoint holds the noise, so a
  resumed run asks for the same genomes bit for bit.
- **Synaptolysis.**  A weight that is exactly 0 in the centre is pruned: the
  subclasses perturb and update the surviving weights only (the noise of pruned
  coordinates is 0, their optimiser state is zeroed), so every genome asked for has
  the centre's zeros.  Every ``prune_every`` generations (option ``prune``) the
  agent's own pruning removes connections from the centre:
  ``agent.mutate(centre, stats, rate, rng)`` with ``stats`` the population's mean
  per-connection trace statistics and ``rate`` from ``agent.next_rate`` (starting
  at ``agent.initial_rate``).  With a target (``prune_to``, :mod:`.prune`) the centre
  is instead cut down to the schedule's budget by the chosen criterion, and validated
  genomes kept from before that use a connection the centre lost are forgotten (the
  champion is always within the budget).  A pruned connection never comes back.
- **Candidates, champion, final candidates.**  The genomes validated each
  generation are the centre (individual -1) and the best ``k - 1`` samples by
  training fitness.  The champion is the best genome by validation fitness so far;
  a few more of the best validated genomes are kept (a small hall of fame) and
  offered, with the current centre, as final candidates.  Without validation the
  champion is the current centre -- in an ES the centre is the estimate the search
  converges to, while the best training sample is the luckiest draw -- with the
  population's mean training fitness as its fitness (the fitness of the centre's
  neighbourhood; the centre itself is never evaluated then).
- **The initial centre** is ``agent.init_genome(rng)``; with ``init_std > 0`` its
  surviving weights are redrawn from ``N(0, init_std^2)`` (its zeros, the initially
  pruned connections, are kept).  pruned-mlp starts every weight at 1.0, which
  saturates its tanh units; the redraw gives the search a small random network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from synapto.common import noise as noise_keys
from synapto.common.errors import UsageError
from synapto.evolution.strategies import prune as target
from synapto.evolution.strategies.base import (
    Candidates,
    Champion,
    Feedback,
    Strategy,
    distinct,
    rank_order,
)
from synapto.evolution.strategies.hall import HallOfFame
from synapto.evolution.strategies.options import (
    Option,
    check_target,
    need_bool,
    need_even_population,
    need_int,
    need_nonnegative,
)

#: validated genomes kept for the final re-evaluation (besides the centre)
HALL_OF_FAME = 4


def centred_ranks(fitness: np.ndarray) -> np.ndarray:
    """Fitness shaping: ranks scaled to [-0.5, 0.5] (worst -0.5, best 0.5); tied fitness
    values share their mean rank, NaN counts as -inf.  The values sum to 0."""
    f = np.asarray(fitness, dtype=np.float64)
    f = np.where(np.isnan(f), -np.inf, f)
    n = f.size
    if n == 1:
        return np.zeros(1)
    order = np.argsort(f, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(n, dtype=np.float64)
    sorted_f = f[order]
    # tied values: the mean of their ranks
    start = np.flatnonzero(np.r_[True, sorted_f[1:] != sorted_f[:-1]])
    stop = np.r_[start[1:], n]
    for a, b in zip(start, stop):
        if b - a > 1:
            ranks[order[a:b]] = 0.5 * (a + b - 1)
    return ranks / (n - 1) - 0.5


class CentreStrategy(Strategy):
    """A strategy searching around one centre genome (see the module docstring).

    Subclasses implement :meth:`_init_search` (the distribution's initial state),
    :meth:`_sample` (this generation's noise and genomes from :attr:`rng`),
    :meth:`_update` (the new centre and distribution from the fitness),
    and :meth:`_forget` (zero the state of newly pruned coordinates), and declare the
    attributes of their search state in :attr:`~.base.Strategy.STATE`, after the centre's.
    """

    COMMON_OPTIONS: ClassVar[dict[str, Option]] = {
        "init_std": Option(
            0.1,
            "> 0: the initial centre's surviving weights are redrawn from N(0, init_std^2) "
            "(the agent's zeros kept); 0: the agent's initial genome as it is",
        ),
        "prune": Option(
            True,
            "the agent's pruning removes connections from the centre every prune_every "
            "generations (false: a dense search of the initial connections)",
        ),
        "prune_every": Option(10, "generations between two prunings of the centre"),
        **target.OPTIONS,
    }
    STATE: ClassVar[tuple[str, ...]] = ("centre", "rate", "last_mean_fitness")
    step_norm: float = math.nan  #: the length of the centre's last step (``/strategy/step_norm``)

    def __init__(self, agent, population: int, options: Mapping[str, Any] | None, rng: np.random.Generator):
        super().__init__(agent, population, options, rng)
        self.n = int(agent.n_params)
        self.generation = 0
        self.centre = np.zeros(self.n)
        self.rate = float(agent.initial_rate)
        self.last_mean_fitness = -math.inf
        #: the best validated genomes (:mod:`.hall`)
        self.hof = HallOfFame.empty(HALL_OF_FAME, self.n)
        self.noise = np.zeros((0, self.n))
        #: the noise key of each row of :attr:`noise` (:mod:`synapto.common.noise`); None if unknown
        self.keys: np.ndarray | None = None
        self.genomes = np.zeros((self.population, self.n))
        self._init_search()  # the search state's attributes, before start() or restore() sets them

    @classmethod
    def check_population(cls, population, options):
        if population < 2:
            raise UsageError(f"strategy {cls.name!r} needs a population >= 2, got {population}")

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        out["init_std"] = need_nonnegative("init_std", out["init_std"])
        out["prune"] = need_bool("prune", out["prune"])
        out["prune_every"] = need_int("prune_every", out["prune_every"])
        return check_target(out)

    # -- the subclass's part ---------------------------------------------------
    def _init_search(self) -> None:
        """Set the attributes of the search state (:attr:`STATE`) for the current centre."""
        raise NotImplementedError

    def _sample(self) -> None:
        """Set :attr:`noise` and :attr:`keys` (:meth:`_draw`) and :attr:`genomes` from them."""
        raise NotImplementedError

    def _draw(self, rows: int) -> None:
        """:attr:`noise`: ``rows`` rows of standard normals on the surviving weights, drawn
        from :attr:`rng` row by row, with their :attr:`keys`."""
        self.noise, self.keys = noise_keys.draw_rows(self.rng, rows, np.flatnonzero(self.alive), self.n)

    def _genomes_from_noise(self) -> np.ndarray:
        """The genomes of :attr:`noise` (a pure function of the state: used after restore)."""
        raise NotImplementedError

    def _update(self, feedback: Feedback) -> None:
        raise NotImplementedError

    def _forget(self, dead: np.ndarray) -> None:
        """Coordinates ``dead`` (indices) were just pruned from the centre."""
        raise NotImplementedError

    def _record(self) -> dict[str, float]:
        return {}

    # -- the seam --------------------------------------------------------------
    @property
    def alive(self) -> np.ndarray:
        """Mask of the centre's surviving connections."""
        return self.centre != 0

    def start(self):
        centre = np.asarray(self.agent.init_genome(self.rng), dtype=np.float64)
        std = self.options["init_std"]
        if std > 0:
            centre = (centre != 0) * (std * self.rng.standard_normal(self.n))
        self.centre = centre
        self.generation = 0
        self.rate = float(self.agent.initial_rate)
        self._init_search()
        self._sample()

    def ask(self):
        return self.genomes

    def candidates(self, fitness, k):
        """The centre (individual -1), then the best ``k - 1`` samples by training fitness."""
        if k <= 0:
            return Candidates(np.zeros(0, np.int64), np.zeros((0, self.n)))
        top = rank_order(fitness)[: k - 1].astype(np.int64)
        return Candidates(np.r_[np.int64(-1), top], np.concatenate([self.centre[None], self.genomes[top]]))

    def _step(self, feedback: Feedback) -> None:
        """Remember the validated genomes, update the search, and prune the centre: with a
        budget, first forget the kept genomes that use a connection the centre has lost (the
        champion is within the budget of the generation it is chosen in; the base then cuts
        the centre); without one, the agent's own pruning every ``prune_every`` generations."""
        fitness = np.asarray(feedback.fitness, dtype=np.float64)
        finite = np.isfinite(fitness)
        self.last_mean_fitness = float(fitness[finite].mean()) if finite.any() else -math.inf
        vf = np.asarray(feedback.validation_fitness, dtype=np.float64)
        if vf.size:
            self.hof.add(vf, feedback.candidates.genomes, self.generation)
        self._update(feedback)
        if self.schedule is not None:
            self.hof.forget(np.any(self.hof.genomes[:, ~self.alive] != 0, axis=1))
        elif self.options["prune"]:
            self._prune(feedback)

    def _populate(self) -> None:
        self._sample()

    def _prune(self, feedback: Feedback) -> None:
        """The agent's own pruning of the centre the next generation samples around."""
        if (self.generation + 1) % self.options["prune_every"]:
            return
        fitness = np.asarray(feedback.fitness, dtype=np.float64)
        finite = np.isfinite(fitness)
        rows = np.asarray(feedback.stats, dtype=np.float64)[finite] if finite.any() else feedback.stats
        stats = np.mean(rows, axis=0)
        conn = np.asarray(feedback.connections, dtype=np.float64)
        elite = -(-self.population // 8)
        self.rate = float(self.agent.next_rate(self.rate, conn[rank_order(fitness)[:elite]], float(conn.mean())))
        before = self.alive
        self.centre = np.asarray(self.agent.mutate(self.centre, stats, self.rate, self.rng), dtype=np.float64)
        self.centre[~before] = 0.0  # an agent's pruning never revives; enforce it for user agents too
        dead = np.flatnonzero(before & ~self.alive)
        if dead.size:
            self._forget(dead)

    # -- the budget (Strategy.cut_to_budget): the centre alone is cut ----------
    def _budgeted(self):
        return self.centre[None]

    def _budget_stats(self, feedback):
        return target.mean_stats(feedback.stats, feedback.fitness)[None]

    def _set_budgeted(self, genomes):
        before = self.alive
        self.centre = genomes[0]
        dead = np.flatnonzero(before & ~self.alive)
        if dead.size:
            self._forget(dead)

    @property
    def champion(self):
        if np.isfinite(self.hof.fitness[0]):
            return self.hof.members()[0]
        return Champion(self.centre, float(self.last_mean_fitness), self.generation - 1)

    def final_candidates(self):
        """The validated genomes kept (best first), then the current centre -- labelled with
        the generation it would run in, never evaluated (fitness NaN); no duplicates."""
        return distinct([*self.hof.members(), Champion(self.centre, float("nan"), self.generation)])

    def record(self):
        budget = (
            {}
            if self.schedule is None
            else {  # of the generation just told
                "connection_budget": float(self.schedule.budget(self.generation - 1))
            }
        )
        return {
            "prune_rate": float(self.rate),
            "centre_connections": float(np.count_nonzero(self.centre)),
            **budget,
            **self._record(),
        }

    def record_arrays(self):
        return {"centre": self.centre.copy()}

    # -- checkpoint: the declared STATE (base), the noise's keys and the hall of fame --
    def state(self):
        arrays, scalars = super().state()
        drawn = {"noise_keys": self.keys} if self.keys is not None else {"noise": self.noise}
        arrays.update({k: np.array(v, copy=True) for k, v in {**drawn, **self.hof.state()}.items()})
        return arrays, scalars

    def restore(self, arrays, scalars):
        super().restore(arrays, scalars)
        self.hof = HallOfFame.restore(arrays)
        if "noise_keys" in arrays:  # the rows are drawn again from their keys
            self.keys = np.array(arrays["noise_keys"], dtype=np.uint64)
            alive, n = np.flatnonzero(self.alive), self.n
            self.noise = (
                np.stack([noise_keys.draw(k, alive, n) for k in self.keys]) if len(self.keys) else np.zeros((0, n))
            )
        else:  # a checkpoint of a version before noise keys
            self.keys = None
            self.noise = np.array(arrays["noise"], dtype=np.float64)
        self.genomes = self._genomes_from_noise()


class MirroredStrategy(CentreStrategy):
    """A centre strategy sampling mirrored pairs ``centre +- sigma e_j`` (rows ``2j``, ``2j + 1``)
    on the surviving weights, ``e_j ~ N(0, I)``; ``sigma`` a scalar or one per weight
    (openai-es, pgpe).  The population must be even."""

    SAMPLING = "mirrored sampling"  #: named in the error for an odd population
    sigma: float | np.ndarray  #: the step size: a number (openai-es) or one per weight (pgpe)

    @classmethod
    def check_population(cls, population, options):
        need_even_population(cls.name, population, cls.SAMPLING)

    def _sample(self):
        self._draw(self.population // 2)
        self.genomes = self._genomes_from_noise()

    def _genomes_from_noise(self):
        return noise_keys.Samples(
            "mirrored", self.centre, self.sigma, np.zeros((0, noise_keys.KEY_WIDTH), np.uint64)
        ).genomes(self.noise)

    def samples(self):
        if self.keys is None:
            return None
        return noise_keys.Samples(
            "mirrored",
            self.centre.copy(),
            np.copy(self.sigma) if np.ndim(self.sigma) else float(self.sigma),
            self.keys.copy(),
        )
