"""``cmaes``: the covariance matrix adaptation evolution strategy (Hansen), with
synaptolysis; separable (diagonal) for long genomes.

A compact numpy implementation following Hansen's tutorial ("The CMA Evolution
Strategy: A Tutorial", 2016) with positive recombination weights only.  The
search distribution is ``N(centre, sigma^2 C)`` over the centre's surviving weights.
With ``N`` surviving weights, ``lambda = P`` samples and ``mu = P // 2`` parents:

- weights ``w_i ~ ln((lambda + 1) / 2) - ln(i)`` for ``i = 1..mu`` (normalised),
  ``mu_eff = 1 / sum(w_i^2)``;
- ``c_c = (4 + mu_eff / N) / (N + 4 + 2 mu_eff / N)``,
  ``c_s = (mu_eff + 2) / (N + mu_eff + 5)``,
  ``c_1 = 2 / ((N + 1.3)^2 + mu_eff)``,
  ``c_mu = min(1 - c_1, 2 (mu_eff - 2 + 1 / mu_eff) / ((N + 2)^2 + mu_eff))``,
  ``d_s = 1 + 2 max(0, sqrt((mu_eff - 1) / (N + 1)) - 1) + c_s``;
- sampling ``x_k = centre + sigma B D z_k`` with ``C = B D^2 B^T`` and ``z_k ~ N(0, I)``;
- the centre moves to the weighted mean of the ``mu`` best (by training fitness),
  the paths ``p_s`` (conjugate) and ``p_c`` accumulate the step, ``C`` gets the rank-one
  and rank-mu updates, ``sigma`` follows ``|p_s|`` against ``E|N(0, I)|``
  (cumulative step-size adaptation).

The separable variant (Ros & Hansen 2008) keeps only the diagonal of ``C`` --
``O(N)`` per sample instead of ``O(N^2)`` and an eigendecomposition -- and multiplies
``c_1`` and ``c_mu`` by ``(N + 2) / 3``: it learns the scale of each weight much
faster, but no correlations.  Option ``separable``: ``"auto"`` (the default) uses it
for genomes longer than :data:`SEPARABLE_ABOVE` weights.

The constants follow the surviving ``N``, which pruning decreases.  When
connections are pruned their rows and columns of ``C`` are dropped (a Gaussian's
marginal over the surviving weights) and their entries of the paths zeroed; the
full matrix keeps its genome-length shape, with zeros where connections are pruned.
Pruning, candidates and the champion: :mod:`.es`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from synapto.common.errors import UsageError
from synapto.common.noise import Samples
from synapto.evolution.strategies.base import rank_order
from synapto.evolution.strategies.es import CentreStrategy
from synapto.evolution.strategies.options import Option, need_positive

#: ``separable = "auto"`` uses the diagonal variant above this genome length
SEPARABLE_ABOVE = 1000
#: eigenvalues of C are kept above this fraction of the largest (numerical safety)
MIN_EIGEN_RATIO = 1e-14


def cma_constants(n: int, population: int, separable: bool) -> dict[str, float | np.ndarray]:
    """The learning rates and weights of CMA-ES for ``n`` dimensions (see the module docstring)."""
    lam = population
    mu = lam // 2
    w = math.log((lam + 1) / 2) - np.log(np.arange(1, mu + 1))
    w = w / w.sum()
    mueff = 1.0 / float(w @ w)
    n = max(n, 1)
    cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
    cs = (mueff + 2) / (n + mueff + 5)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    if separable:
        c1 = c1 * (n + 2) / 3
        cmu = min(1 - c1, cmu * (n + 2) / 3)
    damps = 1 + 2 * max(0.0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
    chin = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
    return {
        "weights": w,
        "mu": mu,
        "mueff": mueff,
        "cc": cc,
        "cs": cs,
        "c1": c1,
        "cmu": cmu,
        "damps": damps,
        "chin": chin,
    }


class CMAES(CentreStrategy):
    """The strategy ``cmaes`` (see the module docstring)."""

    name = "cmaes"
    OPTIONS: ClassVar[dict[str, Option]] = {
        "sigma": Option(0.1, "initial step size (the covariance starts as the identity)"),
        "separable": Option(
            "auto",
            f'"auto": diagonal covariance for genomes longer than {SEPARABLE_ABOVE} '
            "weights; true: always; false: never (full covariance)",
        ),
        **CentreStrategy.COMMON_OPTIONS,
    }
    STATE = (*CentreStrategy.STATE, "sigma", "updates", "cov", "ps", "pc")

    _eigen: tuple | None = None  #: (alive indices, B, D) of the current C, a function of the state

    @classmethod
    def check_population(cls, population, options):
        super().check_population(population, options)
        if population < 4:
            raise UsageError(f"strategy 'cmaes' needs a population >= 4, got {population}")

    @property
    def separable(self) -> bool:
        """The diagonal variant (option ``separable``; ``"auto"``: for long genomes)."""
        sep = self.options["separable"]
        return self.n > SEPARABLE_ABOVE if sep == "auto" else bool(sep)

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        out["sigma"] = need_positive("sigma", out["sigma"])
        sep = out["separable"]
        if not (sep == "auto" or isinstance(sep, (bool, np.bool_))):
            raise UsageError(f'strategy option separable must be "auto", true or false, got {sep!r}')
        return out

    @classmethod
    def memory(cls, n_params, population, options):
        """A full covariance: ``C`` and its eigenvectors, ``n x n`` float64 each."""
        sep = cls.check_options(options)["separable"]
        separable = n_params > SEPARABLE_ABOVE if sep == "auto" else bool(sep)
        return 0 if separable else 2 * int(n_params) ** 2 * 8

    # -- the distribution ------------------------------------------------------
    def _init_search(self):
        alive = self.alive.astype(np.float64)
        self.sigma = self.options["sigma"]
        self.updates = 0.0
        self.cov = alive.copy() if self.separable else np.diag(alive)
        self.ps = np.zeros(self.n)
        self.pc = np.zeros(self.n)
        self._eigen = None

    def _decomposition(self):
        """``(alive, B, D)`` with ``C[alive, alive] = B diag(D^2) B^T`` (B = None: diagonal)."""
        if self._eigen is None:
            alive = np.flatnonzero(self.alive)
            if self.separable:
                self._eigen = (alive, None, np.sqrt(self.cov[alive]))
            else:
                ca = self.cov[np.ix_(alive, alive)]
                if alive.size:
                    d2, b = np.linalg.eigh(ca)
                    d2 = np.maximum(d2, MIN_EIGEN_RATIO * max(float(d2[-1]), 0.0))
                else:
                    d2, b = np.zeros(0), np.zeros((0, 0))
                self._eigen = (alive, b, np.sqrt(d2))
        return self._eigen

    def _directions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alive, y)``: the samples' steps ``B D z`` (before sigma) on the surviving weights."""
        alive, b, d = self._decomposition()
        z = self.noise[:, alive]
        return alive, (z * d if b is None else (z * d) @ b.T)

    def _sample(self):
        self._eigen = None
        self._draw(self.population)
        self.genomes = self._genomes_from_noise()

    def samples(self):
        """Separable CMA-ES only: a full covariance's genomes come from a matrix product,
        whose rounding may differ between one row and many, so they travel whole."""
        if not self.separable or self.keys is None:
            return None
        alive, _, d = self._decomposition()
        scale = np.zeros(self.n)
        scale[alive] = d
        return Samples("scaled", self.centre.copy(), float(self.sigma), self.keys.copy(), scale)

    def _genomes_from_noise(self):
        alive, y = self._directions()
        out = np.repeat(self.centre[None], self.population, axis=0)
        out[:, alive] += self.sigma * y
        return out

    def _update(self, feedback):
        alive, b, d = self._decomposition()
        alive, y = self._directions()
        n = alive.size
        k = cma_constants(n, self.population, self.separable)
        w, mu, mueff = k["weights"], k["mu"], k["mueff"]
        best = rank_order(feedback.fitness)[:mu]
        ys = y[best]
        yw = w @ ys
        centre = self.centre.copy()
        centre[alive] += self.sigma * yw
        self.centre = centre
        self.step_norm = float(self.sigma * math.sqrt(yw @ yw))

        # conjugate evolution path: C^(-1/2) yw = B D^-1 B^T yw
        inv_sqrt_yw = yw / d if b is None else b @ ((b.T @ yw) / d)
        cs, cc = k["cs"], k["cc"]
        ps = (1 - cs) * self.ps[alive] + math.sqrt(cs * (2 - cs) * mueff) * inv_sqrt_yw
        self.updates += 1
        ps_norm = math.sqrt(ps @ ps)
        hsig = ps_norm / math.sqrt(1 - (1 - cs) ** (2 * self.updates)) / k["chin"] < 1.4 + 2 / (n + 1)
        pc = (1 - cc) * self.pc[alive] + (math.sqrt(cc * (2 - cc) * mueff) * yw if hsig else 0.0)
        self.ps = np.zeros(self.n)
        self.ps[alive] = ps
        self.pc = np.zeros(self.n)
        self.pc[alive] = pc

        c1, cmu = k["c1"], k["cmu"]
        keep = 1 - c1 - cmu + (0.0 if hsig else c1 * cc * (2 - cc))
        if self.separable:
            self.cov = self.cov.copy()
            self.cov[alive] = keep * self.cov[alive] + c1 * pc * pc + cmu * (w @ (ys * ys))
        else:
            ix = np.ix_(alive, alive)
            ca = keep * self.cov[ix] + c1 * np.outer(pc, pc) + cmu * (ys.T * w) @ ys
            self.cov = np.zeros_like(self.cov)
            self.cov[ix] = 0.5 * (ca + ca.T)
        self.sigma = self.sigma * math.exp(min(1.0, (cs / k["damps"]) * (ps_norm / k["chin"] - 1)))
        self._eigen = None

    def _forget(self, dead):
        self.ps[dead] = 0.0
        self.pc[dead] = 0.0
        if self.separable:
            self.cov[dead] = 0.0
        else:
            self.cov[dead, :] = 0.0
            self.cov[:, dead] = 0.0
        self._eigen = None

    def restore(self, arrays, scalars):
        self._eigen = None  # of the covariance restored
        super().restore(arrays, scalars)

    def _record(self):
        alive = self.alive
        diag = self.cov[alive] if self.separable else np.diag(self.cov)[alive]
        return {
            "sigma_mean": float(self.sigma * np.mean(np.sqrt(diag))) if alive.any() else 0.0,
            "step_norm": float(self.step_norm),
        }
