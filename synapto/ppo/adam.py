"""Adam (Kingma & Ba, 2015) on a flat parameter vector, PyTorch's variant and defaults.

    m <- b1 m + (1 - b1) g          v <- b2 v + (1 - b2) g^2
    p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

The state (m, v, t) is all a checkpoint needs to continue bit-identically.

``openai-es`` keeps an Adam of its own (:mod:`synapto.evolution.strategies.openai_es`):
it adds epsilon to ``sqrt(v)`` before the bias correction (the ES paper's code, Kingma &
Ba's "epsilon hat") where this one adds it after (PyTorch's), squares the gradient in
another order, and steps only the surviving coordinates.  One class holding both would
keep two code paths to leave the run files of both bit-identical, so there are two.
"""

from __future__ import annotations

import numpy as np


class Adam:
    def __init__(
        self, n: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, dtype=np.float64
    ):
        self.lr, self.beta1, self.beta2, self.eps = float(lr), beta1, beta2, eps
        self.m = np.zeros(n, dtype)
        self.v = np.zeros(n, dtype)
        self.t = 0
        self._tmp = np.zeros(n, dtype)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        """One update of ``params`` in place."""
        b1, b2, tmp = self.beta1, self.beta2, self._tmp
        self.t += 1
        self.m *= b1
        np.multiply(grad, 1.0 - b1, out=tmp)
        self.m += tmp
        self.v *= b2
        np.multiply(grad, grad, out=tmp)
        tmp *= 1.0 - b2
        self.v += tmp
        step_size = self.lr / (1.0 - b1**self.t)
        np.sqrt(self.v, out=tmp)
        tmp /= np.sqrt(1.0 - b2**self.t)
        tmp += self.eps
        np.divide(self.m, tmp, out=tmp)
        tmp *= step_size
        params -= tmp

    def state(self) -> dict[str, np.ndarray]:
        return {"m": self.m.copy(), "v": self.v.copy(), "t": np.array([self.t], dtype=np.int64)}

    def load_state(self, state) -> None:
        self.m[...] = state["m"]
        self.v[...] = state["v"]
        self.t = int(np.asarray(state["t"]).ravel()[0])
