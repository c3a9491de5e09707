"""Observation normalisation (``--obs-norm``): running statistics on the coordinator,
frozen per generation; the workers' side of it.

Workers count the observations of training episodes (count, sum and sum of squares
per component, in float64: :class:`synapto.common.moments.RunningMoments`) and return them with each
result.  The coordinator adds them up in task order -- so the totals are the same for any number of ranks -- and
after each generation freezes the normalisation the next generation's policies see::

    mean = sum / count,  std = sqrt(max(sumsq / count - mean ** 2, MIN_VAR))
    policy input = clip((obs - mean) / std, -CLIP, CLIP)

Generation 0 sees ``mean = 0``, ``std = 1`` (clipping aside, the raw observation).
Validation, selection and test episodes use the normalisation of the generation
their genome was evaluated in, and count nothing.  The frozen ``(mean, std)`` of every
generation is stored in the run file; the running totals are in the checkpoint.
"""

from __future__ import annotations

import numpy as np

from synapto.common.moments import RunningMoments

#: normalised observations are clipped to [-CLIP, CLIP]
CLIP = 5.0
#: floor of the variance (std >= 0.1): near-constant components are not blown up
MIN_VAR = 1e-2


class ObsStats(RunningMoments):
    """Running totals of observations (the coordinator's): :class:`~synapto.common.moments.RunningMoments`
    without a prior, added up from the workers' results."""

    def __init__(self, obs_dim: int):
        super().__init__(obs_dim)

    @property
    def count(self) -> int:
        return int(self.totals[0])

    def add(self, results) -> None:
        """Add the counted observations of ``results``, in their order."""
        for r in results:
            if r is not None and r.obs_count:
                self.add_totals(int(r.obs_count), r.obs_sum, r.obs_sumsq)

    def frozen(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, std)`` from the totals so far (0 and 1 before any observation)."""
        if self.count == 0:
            return np.zeros_like(self.sum), np.ones_like(self.sum)
        return self.mean_std(floor=MIN_VAR)

    def state(self) -> dict[str, np.ndarray]:
        return {
            "obs_count": np.array([self.count], np.int64),
            "obs_sum": self.sum.copy(),
            "obs_sumsq": self.sumsq.copy(),
        }

    def restore(self, arrays) -> None:
        self.load(
            np.concatenate(
                [
                    [float(int(np.asarray(arrays["obs_count"])[0]))],
                    np.asarray(arrays["obs_sum"], dtype=np.float64),
                    np.asarray(arrays["obs_sumsq"], dtype=np.float64),
                ]
            )
        )


class NormalisedActor:
    """A policy's ``act`` behind normalisation and/or counting of observations (per step:
    a copy into the episode's record, and three in-place operations to normalise)."""

    def __init__(self, act, obs_dim: int, norm: tuple[np.ndarray, np.ndarray] | None, count: bool):
        self._act = act
        self._norm = None if norm is None else (np.asarray(norm[0], np.float64), np.asarray(norm[1], np.float64))
        self._rec = np.zeros((256, obs_dim)) if count else None
        self._t = 0
        #: the counted observations' totals (None without counting); numpy's order of the squares
        self.moments = RunningMoments(obs_dim, squares="square") if count else None

    def start(self) -> None:
        self._t = 0

    def __call__(self, obs):
        if self._rec is not None:
            if self._t == self._rec.shape[0]:
                self._rec = np.concatenate([self._rec, np.zeros_like(self._rec)])
            self._rec[self._t] = obs
            self._t += 1
        if self._norm is None:
            return self._act(obs)
        x = np.subtract(obs, self._norm[0])  # a new array: the policy may keep what it is given
        x /= self._norm[1]
        np.clip(x, -CLIP, CLIP, out=x)
        return self._act(x)

    def end(self) -> None:
        """Fold this episode's observations into the totals."""
        if self.moments is not None and self._rec is not None and self._t:
            self.moments.add_rows(self._rec[: self._t])

    @property
    def count(self) -> int:
        """Observations counted so far."""
        return 0 if self.moments is None else int(self.moments.count)

    @property
    def sum(self) -> np.ndarray | None:
        """Their sum per component (None without counting)."""
        return None if self.moments is None else self.moments.sum.copy()

    @property
    def sumsq(self) -> np.ndarray | None:
        """Their sum of squares per component (None without counting)."""
        return None if self.moments is None else self.moments.sumsq.copy()
