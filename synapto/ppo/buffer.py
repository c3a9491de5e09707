"""One epoch of experience on one rank: storage, GAE-lambda advantages, reward-to-go.

The rollout stores observations, actions and rewards step by step, and marks where
each *path* (a piece of one episode) ends and how:

* **terminated** (the environment says the episode is over): the value after the
  last step is 0;
* **truncated** (the env's time limit, ``max_ep_len``, or the end of the epoch): the
  episode would have gone on, so the value after the last step is bootstrapped with
  V(s') of the observation that followed it.

Values are computed after the rollout in one batched forward pass.  Then, per path,
with ``V_T`` the bootstrap value (0 at a terminal):

    delta_t = r_t + gamma V_{t+1} - V_t
    A_t     = sum_k (gamma lam)^k delta_{t+k}          (GAE-lambda)
    R_t     = sum_k gamma^k r_{t+k} + gamma^(T-t) V_T  (discounted reward-to-go: the value target)
"""

from __future__ import annotations

import numpy as np


def discount_cumsum(x, discount: float, last: float = 0.0) -> np.ndarray:
    """``y_t = x_t + discount * y_{t+1}`` with ``y_T = last``; float64."""
    out = np.empty(len(x), dtype=np.float64)
    acc = float(last)
    values = x.tolist() if isinstance(x, np.ndarray) else list(x)
    for t in range(len(values) - 1, -1, -1):
        acc = values[t] + discount * acc
        out[t] = acc
    return out


def gae_path(rew, val, last_val: float, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and reward-to-go of one path (float64)."""
    rew = np.asarray(rew, dtype=np.float64)
    val = np.asarray(val, dtype=np.float64)
    next_val = np.append(val[1:], last_val)
    deltas = rew + gamma * next_val - val
    adv = discount_cumsum(deltas, gamma * lam)
    ret = discount_cumsum(rew, gamma, last=last_val)
    return adv, ret


class EpochBuffer:
    """Preallocated storage for ``n`` steps of one rank."""

    def __init__(self, n: int, obs_dim: int, act_dim: int, discrete: bool, dtype):
        self.n = n
        self.obs = np.zeros((n, obs_dim), dtype)
        self.act = np.zeros(n, np.int64) if discrete else np.zeros((n, act_dim), dtype)
        self.rew = np.zeros(n, np.float64)
        self.val = np.zeros(n, np.float64)
        self.adv = np.zeros(n, np.float64)
        self.ret = np.zeros(n, np.float64)
        self.clear()

    def clear(self) -> None:
        self.path_ends: list[int] = []  # exclusive end index of each path
        self.boot_obs: list[np.ndarray | None] = []  # s' to bootstrap from, None at a terminal

    def end_path(self, end: int, boot_obs: np.ndarray | None) -> None:
        """Close the path ending before step ``end``; ``boot_obs`` None means terminated."""
        start = self.path_ends[-1] if self.path_ends else 0
        if end <= start:
            raise ValueError(f"empty path: end {end} <= start {start}")
        self.path_ends.append(end)
        self.boot_obs.append(None if boot_obs is None else np.array(boot_obs, dtype=self.obs.dtype))

    def finish(self, value_fn, gamma: float, lam: float) -> None:
        """Values (one batched pass), then advantages and returns of every path."""
        if not self.path_ends or self.path_ends[-1] != self.n:
            raise ValueError("finish() needs every step inside a closed path")
        self.val[:] = value_fn(self.obs)
        boots = [o for o in self.boot_obs if o is not None]
        boot_vals = iter(value_fn(np.stack(boots)).tolist() if boots else [])
        start = 0
        for end, boot in zip(self.path_ends, self.boot_obs):
            last = 0.0 if boot is None else next(boot_vals)
            adv, ret = gae_path(self.rew[start:end], self.val[start:end], last, gamma, lam)
            self.adv[start:end] = adv
            self.ret[start:end] = ret
            start = end
