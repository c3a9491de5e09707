"""``pgpe``: policy gradients with parameter-based exploration (Sehnke et al. 2010),
with the ClipUp optimiser (Toklu et al. 2020) and synaptolysis.

The search distribution is ``N(centre, diag(sigma^2))`` with one standard deviation
per weight.  Each generation draws ``P / 2`` standard normal vectors ``z_j`` over the
centre's surviving weights and asks for the symmetric pairs ``centre + sigma z_j``
(row ``2j``) and ``centre - sigma z_j`` (row ``2j + 1``).  With the training fitness
shaped into centred ranks ``u`` (mean 0) and a pair's ``u+``, ``u-``:

- the centre's gradient is the mean over pairs of ``(u+ - u-) / 2 * sigma z_j``;
- sigma's gradient is the mean over pairs of ``((u+ + u-) / 2 - mean(u)) * sigma (z_j^2 - 1)``
  (the score of a Gaussian's standard deviation, ``(eps^2 - sigma^2) / sigma``);
- sigma moves by ``sigma_lr`` times its gradient, each component by at most the
  fraction ``sigma_max_change`` of its value;
- ClipUp moves the centre: ``velocity <- momentum * velocity + step_size * grad / |grad|``,
  then ``velocity`` is shortened to length ``max_speed`` when it is longer, and the
  centre moves by ``velocity``.  The ClipUp paper suggests ``step_size = max_speed / 2``
  (the default: ``step_size = 0``).

Pruned coordinates (exact zeros of the centre) get no noise, no velocity and sigma 0.
Pruning, candidates and the champion: :mod:`.es`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

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


class PGPE(MirroredStrategy):
    """The strategy ``pgpe`` (see the module docstring)."""

    name = "pgpe"
    SAMPLING = "symmetric sampling"
    sigma: np.ndarray
    STATE = (*CentreStrategy.STATE, "sigma", "velocity")
    OPTIONS: ClassVar[dict[str, Option]] = {
        "sigma": Option(0.1, "initial standard deviation of every surviving weight"),
        "sigma_lr": Option(0.1, "learning rate of the standard deviations"),
        "sigma_max_change": Option(0.2, "largest relative change of a standard deviation in one generation"),
        "max_speed": Option(0.15, "ClipUp: the longest step of the centre"),
        "step_size": Option(
            0.0,
            "ClipUp: length of the normalised gradient added to the velocity "
            "(0: max_speed / 2, as the ClipUp paper suggests)",
        ),
        "momentum": Option(0.9, "ClipUp: decay of the velocity"),
        **CentreStrategy.COMMON_OPTIONS,
    }

    @classmethod
    def check_options(cls, options):
        out = super().check_options(options)
        for k in ("sigma", "sigma_lr", "max_speed"):
            out[k] = need_positive(k, out[k])
        out["sigma_max_change"] = need_fraction("sigma_max_change", out["sigma_max_change"])
        out["step_size"] = need_nonnegative("step_size", out["step_size"])
        out["momentum"] = need_fraction("momentum", out["momentum"])
        return out

    @property
    def step_size(self) -> float:
        return self.options["step_size"] or 0.5 * self.options["max_speed"]

    def _init_search(self):
        self.sigma = self.alive * self.options["sigma"]
        self.velocity = np.zeros(self.n)

    def _update(self, feedback):
        o = self.options
        alive = np.flatnonzero(self.alive)
        pairs = self.population // 2
        u = centred_ranks(feedback.fitness)
        up, um = u[0::2], u[1::2]
        z = self.noise[:, alive]
        sigma = self.sigma[alive]
        grad = 0.5 * ((up - um) @ z) * sigma / pairs
        grad_sigma = ((0.5 * (up + um) - u.mean()) @ (z * z - 1.0)) * sigma / pairs

        velocity = o["momentum"] * self.velocity[alive]
        norm = math.sqrt(grad @ grad)
        if norm > 0:
            velocity = velocity + (self.step_size / norm) * grad
        speed = math.sqrt(velocity @ velocity)
        if speed > o["max_speed"]:
            velocity = velocity * (o["max_speed"] / speed)
        self.velocity = np.zeros(self.n)
        self.velocity[alive] = velocity
        centre = self.centre.copy()
        centre[alive] += velocity
        self.centre = centre
        self.step_norm = min(speed, o["max_speed"])

        change = o["sigma_max_change"]
        new_sigma = np.clip(sigma + o["sigma_lr"] * grad_sigma, sigma * (1 - change), sigma * (1 + change))
        self.sigma = np.zeros(self.n)
        self.sigma[alive] = new_sigma

    def _forget(self, dead):
        self.velocity[dead] = 0.0
        self.sigma[dead] = 0.0

    def _record(self):
        alive = self.alive
        return {
            "sigma_mean": float(self.sigma[alive].mean()) if alive.any() else 0.0,
            "step_norm": float(self.step_norm),
        }
