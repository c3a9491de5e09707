"""PPO's running normalisation of observations (``obs_norm``) and rewards (``reward_scale``),
as rl-zoo's ``normalize: true`` does it, over MPI ranks and exactly resumable.

Both keep running moments (:class:`synapto.common.moments.RunningMoments`) -- a count, and per
component a sum and a sum of squares, in float64 -- started from a prior of weight ``1e-4`` with
mean 0 and variance 1 (so the first values are not divided by a variance of 0)::

    mean = sum / count,   var = max(sumsq / count - mean^2, 0)

* **Observations**: every observation a policy acts on is first added to the moments
  (the rank's batch of ``n_envs`` at a time), then normalised with them:
  ``clip((obs - mean) / sqrt(var + 1e-8), -10, 10)``.  The buffer keeps the normalised
  observations the policy saw.
* **Rewards**: each env keeps its discounted return ``R <- gamma R + r`` (0 at the start
  of an episode); the moments are those of ``R``, and the reward stored for learning is
  ``clip(r / sqrt(var(R) + 1e-8), -10, 10)``.  Logged returns stay the env's own.

Within an epoch each rank adds its own steps to the moments it started the epoch with;
at the end of the epoch the ranks' additions are summed (one Allreduce) into the moments
every rank starts the next epoch from.  Those moments go to the checkpoint, and the
observation normalisation after every epoch -- the one the policy of that epoch is
tested with -- to the run file (``/obs_norm``).  With one rank and one env this is the
per-step running normalisation of rl-zoo; with more, each rank's view is its own until
the epoch ends, so a run is bit-identical for a given number of ranks.
"""

from __future__ import annotations

import numpy as np

from synapto.common.moments import RunningMoments

PRIOR = 1e-4  #: weight of the prior (mean 0, variance 1) in the moments
EPS = 1e-8  #: added to the variance before its square root
CLIP = 10.0  #: normalised observations and scaled rewards are clipped to [-CLIP, CLIP]


class Moments:
    """Running moments (:class:`~synapto.common.moments.RunningMoments`, with the prior) over MPI ranks:
    ``base`` (every rank's, up to this epoch) plus this rank's additions since (``local``)."""

    def __init__(self, dim: int):
        self.dim = dim
        self._base = RunningMoments(dim, prior=PRIOR)
        self._local = RunningMoments(dim)
        self._now = RunningMoments(dim, prior=PRIOR)  # base + local: this rank's view

    @property
    def base(self) -> np.ndarray:
        """Every rank's moments up to this epoch, packed ``[count, sum, sumsq]``."""
        return self._base.totals

    @property
    def local(self) -> np.ndarray:
        """This rank's additions since, packed as :attr:`base`."""
        return self._local.totals

    def add(self, x: np.ndarray) -> None:
        """Add the rows of ``x`` (n, dim) -- or one value per row for ``dim`` 1 (n,)."""
        self._local.add_rows(x)
        np.add(self.base, self.local, out=self._now.totals)

    def mean_std(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, sqrt(var + EPS))`` of the moments so far (this rank's view)."""
        return self._now.mean_std(eps=EPS)

    def merge(self, coll) -> None:
        """End of an epoch: every rank's additions summed into ``base`` (a collective)."""
        self.base[...] += coll.sum_(self.local.copy())
        self.local[:] = 0.0
        self._now.load(self.base)

    def state(self) -> np.ndarray:
        return self.base.copy()

    def load(self, base: np.ndarray) -> None:
        self._base.load(base)
        self.local[:] = 0.0
        self._now.load(self.base)


class ObsNormaliser:
    """``obs_norm``: add the observations, then normalise them (training), or only normalise
    with frozen ``(mean, std)`` (tests, render)."""

    def __init__(self, dim: int):
        self.moments = Moments(dim)

    def __call__(self, obs: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Add ``obs`` (n, dim) to the moments and write their normalisation into ``out``."""
        self.moments.add(obs)
        mean, std = self.moments.mean_std()
        return normalise(obs, mean, std, out)


def normalise(obs, mean, std, out=None) -> np.ndarray:
    """``clip((obs - mean) / std, -CLIP, CLIP)`` into ``out`` (its dtype)."""
    x = (np.asarray(obs, dtype=np.float64) - mean) / std
    np.clip(x, -CLIP, CLIP, out=x)
    if out is None:
        return x
    out[...] = x
    return out


class RewardScaler:
    """``reward_scale``: rewards divided by the running std of each env's discounted return."""

    def __init__(self, n_envs: int, gamma: float):
        self.moments = Moments(1)
        self.gamma = gamma
        self.ret = np.zeros(n_envs)

    def start(self) -> None:
        """A new epoch: every env starts a new episode."""
        self.ret[:] = 0.0

    def __call__(self, rewards: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """The scaled ``rewards`` of one lockstep step; ``ended`` marks envs whose episode ended."""
        self.ret = self.ret * self.gamma + rewards
        self.moments.add(self.ret)
        _, std = self.moments.mean_std()
        self.ret[ended] = 0.0
        return np.clip(rewards / std[0], -CLIP, CLIP)
