"""A tanh multilayer perceptron with hand-written backpropagation.

The network maps ``x`` (batch, sizes[0]) to (batch, sizes[-1]):

    h_0 = x,   h_l = tanh(h_{l-1} W_l + b_l)  for hidden layers,   y = h_{L-1} W_L + b_L

(linear output, as Spinning Up's MLP actor-critic).  All parameters live in one flat
vector -- ``W_1, b_1, W_2, b_2, ...``, each ``W_l`` of shape (fan_in, fan_out) in
row-major order -- so the optimiser and MPI see a single array.  :class:`MLP` only
holds *views* into that vector and into a gradient vector of the same layout.

Backward, for a loss ``L`` and ``D = dL/dy`` (batch, out):

    dL/dW_L = h_{L-1}^T D,   dL/db_L = sum over the batch of D,
    D_{l-1} = (D_l W_l^T) * (1 - h_{l-1}^2)      (tanh' = 1 - tanh^2)

and so on down to the first layer.  The gradient with respect to ``x`` is never
needed and never computed.  Batched passes write into a :class:`Workspace` allocated
once per batch size, so a training step allocates (almost) nothing.
"""

from __future__ import annotations

import itertools

import numpy as np


def layer_shapes(sizes) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in itertools.pairwise(sizes)]


def n_params(sizes) -> int:
    return sum(a * b + b for a, b in layer_shapes(sizes))


def init_params(sizes, rng: np.random.Generator, dtype=np.float64) -> np.ndarray:
    """PyTorch's default for ``nn.Linear``: W and b uniform in +-1/sqrt(fan_in)."""
    parts = []
    for fan_in, fan_out in layer_shapes(sizes):
        bound = 1.0 / np.sqrt(fan_in)
        parts.append(rng.uniform(-bound, bound, size=fan_in * fan_out))
        parts.append(rng.uniform(-bound, bound, size=fan_out))
    return np.concatenate(parts).astype(dtype)


def orthogonal_params(sizes, rng: np.random.Generator, output_gain: float, dtype=np.float64) -> np.ndarray:
    """Orthogonal weights -- gain sqrt(2) in hidden layers, ``output_gain`` in the last -- and
    zero biases (the initialisation of rl-zoo's PPO): each W is Q of the QR decomposition of
    a standard normal matrix, its columns' signs fixed by R's diagonal."""
    parts = []
    shapes = layer_shapes(sizes)
    for i, (fan_in, fan_out) in enumerate(shapes):
        gain = output_gain if i == len(shapes) - 1 else np.sqrt(2.0)
        a = rng.standard_normal((max(fan_in, fan_out), min(fan_in, fan_out)))
        q, r = np.linalg.qr(a)
        q *= np.sign(np.diag(r))
        w = q if fan_in >= fan_out else q.T
        parts.append(gain * w.ravel())
        parts.append(np.zeros(fan_out))
    return np.concatenate(parts).astype(dtype)


def _views(flat: np.ndarray, sizes) -> tuple[list[np.ndarray], list[np.ndarray]]:
    weights, biases, at = [], [], 0
    for fan_in, fan_out in layer_shapes(sizes):
        weights.append(flat[at : at + fan_in * fan_out].reshape(fan_in, fan_out))
        at += fan_in * fan_out
        biases.append(flat[at : at + fan_out])
        at += fan_out
    return weights, biases


class Workspace:
    """Preallocated arrays for batched passes over ``n`` rows.

    Biases ride in the matrix products: the input and every hidden layer's output are
    stored *augmented* with a last column of ones, so ``[a, 1] @ [W; b] = a W + b``
    (``W_l`` and ``b_l`` are adjacent in the flat vector, so ``[W_l; b_l]`` is a view)
    and ``[a, 1]^T D`` is ``[dL/dW; dL/db]`` in one product.  That saves a broadcast
    addition per layer (as slow as the product itself at 4000 x 32) and a reduction per
    layer in the backward pass.
    """

    def __init__(self, sizes, n: int, dtype):
        self.n = n
        self.xa = np.ones((n, sizes[0] + 1), dtype)  # [x, 1]
        self.z = [np.empty((n, s), dtype) for s in sizes[1:-1]]  # hidden: 1 + tanh, contiguous
        self.ha = [np.ones((n, s + 1), dtype) for s in sizes[1:-1]]  # hidden: [tanh, 1]
        self.y = np.empty((n, sizes[-1]), dtype)  # output (linear)
        self.d = [np.empty((n, s), dtype) for s in sizes[1:-1]]  # deltas of the hidden layers
        self.tmp = [np.empty((n, s), dtype) for s in sizes[1:-1]]  # tanh' = 1 - h^2


class MLP:
    """Forward and backward passes over the layers viewed in ``params`` and ``grad``."""

    def __init__(self, sizes, params: np.ndarray, grad: np.ndarray | None = None):
        self.sizes = tuple(int(s) for s in sizes)
        if params.shape != (n_params(self.sizes),):
            raise ValueError(f"MLP {self.sizes} needs {n_params(self.sizes)} parameters, got {params.shape}")
        self.params = params
        self.W, self.b = _views(params, self.sizes)
        self.grad = np.zeros_like(params) if grad is None else grad
        self.gW, self.gb = _views(self.grad, self.sizes)
        # One-row pass of the rollout (called every env step, so every call counts):
        # W_l and b_l are adjacent in the flat vector, i.e. together the matrix
        # [W_l; b_l] of shape (fan_in + 1, fan_out), and a hidden layer's output
        # buffer ends with a constant 1, so the next layer is a single matmul.
        self._Wb = [
            params[a : a + (i + 1) * o].reshape(i + 1, o)
            for a, (i, o) in zip(
                np.cumsum([0] + [i * o + o for i, o in layer_shapes(self.sizes)]), layer_shapes(self.sizes)
            )
        ]
        self._gWb = [
            self.grad[a : a + (i + 1) * o].reshape(i + 1, o)
            for a, (i, o) in zip(
                np.cumsum([0] + [i * o + o for i, o in layer_shapes(self.sizes)]), layer_shapes(self.sizes)
            )
        ]
        self._row = [np.ones(s + 1, params.dtype) for s in self.sizes[1:]]
        self._spaces: dict[int, Workspace] = {}

    def workspace(self, n: int) -> Workspace:
        """The (cached) workspace for batches of ``n`` rows."""
        ws = self._spaces.get(n)
        if ws is None:
            ws = self._spaces[n] = Workspace(self.sizes, n, self.params.dtype)
        return ws

    def forward(self, x: np.ndarray, ws: Workspace | None = None) -> np.ndarray:
        """Outputs for a batch ``x`` (n, in).  The result lives in ``ws`` (reused by the next call).

        A hidden layer is ``z = [a, 1] @ [W; b]``, then ``tanh`` in the exp form of
        :func:`synapto.common.fastmath.tanh_`, stopping at ``1 + tanh`` in ``z`` (kept,
        contiguous, for the backward pass) and writing ``tanh`` into the augmented output.
        """
        if ws is None:
            ws = self.workspace(x.shape[0])
        ws.xa[:, :-1] = x
        a = ws.xa
        for z, ha, Wb in zip(ws.z, ws.ha, self._Wb):
            np.dot(a, Wb, out=z)
            z *= -2.0
            with np.errstate(over="ignore", under="ignore"):
                np.exp(z, out=z)
            z += 1.0
            np.divide(2.0, z, out=z)  # 1 + tanh
            np.subtract(z, 1.0, out=ha[:, :-1])
            a = ha
        np.dot(a, self._Wb[-1], out=ws.y)
        return ws.y

    def forward1(self, x: np.ndarray) -> np.ndarray:
        """Output for one input vector (the rollout's per-step call); reuses internal buffers."""
        rows = self._row
        h = rows[0][:-1]
        np.dot(x, self.W[0], out=h)
        h += self.b[0]
        for k in range(1, len(rows)):
            np.tanh(h, out=h)
            h = rows[k][:-1]
            np.dot(rows[k - 1], self._Wb[k], out=h)
        return h

    def backward(self, ws: Workspace, d_out: np.ndarray) -> np.ndarray:
        """Write dL/dparams into ``self.grad`` given ``d_out = dL/dy`` for the last forward on ``ws``.

        With ``z = 1 + h`` kept from the forward pass, ``tanh' = 1 - h^2 = (2 - z) z``.
        """
        d = d_out
        for k in range(len(self.W) - 1, -1, -1):
            a_prev = ws.ha[k - 1] if k > 0 else ws.xa
            np.dot(a_prev.T, d, out=self._gWb[k])  # [dL/dW_k; dL/db_k]
            if k > 0:
                d_prev, slope, z = ws.d[k - 1], ws.tmp[k - 1], ws.z[k - 1]
                np.dot(d, self.W[k].T, out=d_prev)
                np.subtract(2.0, z, out=slope)
                slope *= z
                d_prev *= slope
                d = d_prev
        return self.grad
