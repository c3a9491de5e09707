"""``ars``: Augmented Random Search (Mania, Guy & Recht 2018), with synaptolysis.

Each generation draws ``N = P / 2`` standard normal directions ``d_k`` over the centre's
surviving weights and asks for ``centre + nu d_k`` (row ``2k``) and ``centre - nu d_k``
(row ``2k + 1``), ``nu`` the option ``sigma``.  With ``r+_k``, ``r-_k`` their training
fitness (the raw returns, less the agent's penalty and the env option ``reward_shift``
per step: no rank shaping), the ``b`` directions with the largest ``max(r+_k, r-_k)``
(option ``top``; 0 takes all ``N``) move the centre::

    centre <- centre + lr / (b sigma_R) * sum_k (r+_k - r-_k) d_k

where ``sigma_R`` is the standard deviation of the ``2 b`` returns used.  A generation
whose returns do not differ (``sigma_R = 0``) leaves the centre where it is.  Directions
with a non-finite fitness on either side are never used.

The paper's four versions are options of a run: **V1** is ``top = 0`` (every direction)
on raw observations; **V1-t** sets ``top`` to ``b < N``; **V2** and **V2-t** add
``--obs-norm`` (observations normalised by the running mean and standard deviation of
the training states, frozen per generation: :mod:`synapto.evolution.obs_norm`).  The
paper's policies are linear: ``--agent pruned-mlp --hidden 0`` (``hidden = []`` in a
config file) is one, without biases, with ``tanh`` on the output (the actions of
MuJoCo's tasks lie in [-1, 1]); hidden layers work the same way.  ARS starts its
policy at 0, which in synapto means "pruned": ``init_std`` (small by default here)
draws the initial weights instead.

Pruned coordinates (exact zeros of the centre) get no noise and no step: pruning,
candidates and the champion work as for the other centre strategies (:mod:`.es`).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from synapto.common.errors import UsageError
from synapto.evolution.strategies.base import rank_order
from synapto.evolution.strategies.es import CentreStrategy, MirroredStrategy
from synapto.evolution.strategies.options import Option, need_int, need_positive


class ARS(MirroredStrategy):
    """The strategy ``ars`` (see the module docstring)."""

    name = "ars"
    SAMPLING = "N directions, each evaluated at +sigma and -sigma"
    reward_std: float = math.nan  #: sigma_R of the last update
    used = 0  #: the directions the last update used
    OPTIONS: ClassVar[dict[str, Option]] = {
        "sigma": Option(0.03, "nu: standard deviation of the exploration noise along each direction"),
        "lr": Option(0.02, "alpha: step size of the centre"),
        "top": Option(
            0, "b: directions used in the update, those with the best max(r+, r-) (0: all P / 2, the non-t versions)"
        ),
        **CentreStrategy.COMMON_OPTIONS,
        "init_std": Option(
            0.01,
            "> 0: the initial centre's surviving weights are drawn from "
            "N(0, init_std^2) (ARS starts at 0, which synapto reads as pruned); "
            "0: the agent's initial genome as it is",
        ),
    }

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        for k in ("sigma", "lr"):
            out[k] = need_positive(k, out[k])
        out["top"] = need_int("top", out["top"], low=0)
        return out

    @classmethod
    def check_population(cls, population, options):
        super().check_population(population, options)
        top = options.get("top", 0)
        if top > population // 2:
            raise UsageError(
                f"strategy option top must be at most the number of directions, population / 2 = "
                f"{population // 2}, got {top}"
            )

    @property
    def directions(self) -> int:
        """``b``: the directions an update uses."""
        return self.options["top"] or self.population // 2

    def _init_search(self):
        self.sigma = self.options["sigma"]

    def _update(self, feedback):
        fitness = np.asarray(feedback.fitness, dtype=np.float64)
        plus, minus = fitness[0::2], fitness[1::2]
        usable = np.isfinite(plus) & np.isfinite(minus)
        best = np.where(usable, np.maximum(plus, minus), -np.inf)
        pick = rank_order(best)[: self.directions]
        pick = pick[usable[pick]]
        self.used = int(pick.size)
        self.step_norm, self.reward_std = 0.0, math.nan
        if pick.size == 0:
            return
        self.reward_std = float(np.std(np.concatenate([plus[pick], minus[pick]])))
        if not self.reward_std > 0:
            return
        alive = np.flatnonzero(self.alive)
        step = (plus[pick] - minus[pick]) @ self.noise[np.ix_(pick, alive)]
        step *= self.options["lr"] / (pick.size * self.reward_std)
        centre = self.centre.copy()
        centre[alive] += step
        self.centre = centre
        self.step_norm = float(np.sqrt(step @ step))

    def _forget(self, dead):
        pass  # no state per weight besides the centre

    def _record(self):
        return {
            "sigma_mean": float(self.sigma),
            "step_norm": float(self.step_norm),
            "reward_std": float(self.reward_std),
            "directions_used": float(self.used),
        }
