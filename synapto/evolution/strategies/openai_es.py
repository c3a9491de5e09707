"""``openai-es``: the evolution strategy of Salimans et al. (2017), with synaptolysis.

Each generation draws ``P / 2`` standard normal vectors ``e_j`` over the centre's
surviving weights and asks for the mirrored pairs ``centre + sigma e_j`` (row ``2j``)
and ``centre - sigma e_j`` (row ``2j + 1``).  The training fitness is shaped into
centred ranks ``u`` (:func:`~synapto.evolution.strategies.es.centred_ranks`) and the
ascent direction is ``g = sum_j (u_2j - u_2j+1) e_j / P``.  Adam minimises
``-g + weight_decay * centre`` (the L2 decay acting through the optimiser, as in the
paper's code); like that code, ``g`` is not divided by ``sigma``, so the scale of
``g`` only matters against the decay term, Adam normalising the rest.  After the
update ``sigma <- sigma * sigma_decay``, but not below ``sigma_min`` (a sigma that
starts below ``sigma_min`` stays where it is).

Pruned coordinates (exact zeros of the centre) get no noise, no step and zeroed
Adam moments.  Pruning, candidates and the champion: :mod:`.es`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from synapto.common.errors import UsageError
from synapto.evolution.strategies.es import (
    CentreStrategy,
    MirroredStrategy,
    centred_ranks,
)
from synapto.evolution.strategies.options import (
    Option,
    need_fraction,
    need_nonnegative,
    need_positive,
)


class OpenAIES(MirroredStrategy):
    """The strategy ``openai-es`` (see the module docstring)."""

    name = "openai-es"
    sigma: float
    OPTIONS: ClassVar[dict[str, Option]] = {
        "sigma": Option(0.1, "standard deviation of the perturbations (first generation)"),
        "sigma_decay": Option(1.0, "sigma is multiplied by this after every generation (1: fixed)"),
        "sigma_min": Option(0.01, "sigma never decays below this"),
        "lr": Option(0.03, "Adam step size on the centre"),
        "weight_decay": Option(0.005, "L2 coefficient added to the gradient Adam follows"),
        "beta1": Option(0.9, "Adam: decay of the first moment"),
        "beta2": Option(0.999, "Adam: decay of the second moment"),
        **CentreStrategy.COMMON_OPTIONS,
    }
    STATE = (*CentreStrategy.STATE, "sigma", "adam_t", "adam_m", "adam_v")
    ADAM_EPS = 1e-8

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        for k in ("sigma", "sigma_min", "lr"):
            out[k] = need_positive(k, out[k])
        out["weight_decay"] = need_nonnegative("weight_decay", out["weight_decay"])
        out["sigma_decay"] = need_positive("sigma_decay", out["sigma_decay"])
        if out["sigma_decay"] > 1:
            raise UsageError(f"strategy option sigma_decay must be in (0, 1], got {out['sigma_decay']!r}")
        for k in ("beta1", "beta2"):
            out[k] = need_fraction(k, out[k])
        return out

    def _init_search(self):
        self.sigma = self.options["sigma"]
        self.adam_t = 0.0
        self.adam_m = np.zeros(self.n)
        self.adam_v = np.zeros(self.n)

    def _update(self, feedback):
        o = self.options
        alive = np.flatnonzero(self.alive)
        u = centred_ranks(feedback.fitness)
        g = (u[0::2] - u[1::2]) @ self.noise[:, alive] / self.population
        grad = -g + o["weight_decay"] * self.centre[alive]
        b1, b2 = o["beta1"], o["beta2"]
        self.adam_t += 1
        self.adam_m[alive] = b1 * self.adam_m[alive] + (1 - b1) * grad
        self.adam_v[alive] = b2 * self.adam_v[alive] + (1 - b2) * grad * grad
        t = self.adam_t
        a = o["lr"] * math.sqrt(1 - b2**t) / (1 - b1**t)
        step = a * self.adam_m[alive] / (np.sqrt(self.adam_v[alive]) + self.ADAM_EPS)
        centre = self.centre.copy()
        centre[alive] -= step
        self.centre = centre
        self.step_norm = float(np.sqrt(step @ step))
        self.sigma = min(self.sigma, max(o["sigma_min"], self.sigma * o["sigma_decay"]))

    def _forget(self, dead):
        self.adam_m[dead] = 0.0
        self.adam_v[dead] = 0.0

    def _record(self):
        return {"sigma_mean": float(self.sigma), "step_norm": self.step_norm}
