"""Policy and value function: MLPs with a distribution head, and PPO's losses.

Two heads turn the policy MLP's output into a distribution over actions:

* :class:`GaussianHead` (Box actions): mean = MLP output, a state-independent
  log standard deviation (one parameter per action dimension, starting at -0.5),
  ``log p(a) = -1/2 sum z^2 - sum log_std - k/2 log 2 pi`` with ``z = (a - mean) / std``.
* :class:`CategoricalHead` (Discrete actions): logits = MLP output.

Each head gives log-probabilities, entropies and exact KL divergences, and their
gradients with respect to the MLP output (and the log-std).  PPO needs the
log-probability gradient; the entropy and KL gradients are provided (and tested)
for extensions such as an entropy bonus.  The KL that early stopping uses is
Spinning Up's sample estimate ``mean(logp_old - logp)``.

:meth:`Policy.surrogate` is PPO-clip's loss ``-mean(min(r A, clip(r, 1-e, 1+e) A))``
with ``r = exp(logp - logp_old)``.  Its gradient with respect to ``logp_i`` is
``-r_i A_i / n`` where the unclipped term is the minimum, else 0.
"""

from __future__ import annotations

import numpy as np

from synapto.ppo.nn import MLP, init_params, n_params, orthogonal_params

LOG_2PI = float(np.log(2.0 * np.pi))
LOG_STD_INIT = -0.5  #: Spinning Up's initial log standard deviation


class GaussianHead:
    """Diagonal Gaussian; ``extra`` is the log-std vector (k,)."""

    discrete = False

    def __init__(self, act_dim: int):
        self.act_dim = act_dim
        self.n_extra = act_dim

    def logp(self, mean, log_std, act):
        """``(logp (n,), (diff, diff^2, w))`` with ``diff = act - mean``, ``w = 1 / std^2``.

        Written as ``-1/2 (diff^2 @ w) - sum log_std - k/2 log 2 pi``: a matrix-vector
        product instead of per-column broadcasting, which is slow on (n, k) arrays
        with small k.  The tuple is what :meth:`logp_grad` reuses.
        """
        diff = act - mean
        sq = diff * diff
        w = np.exp(-2.0 * log_std)
        logp = np.dot(sq, w)
        logp *= -0.5
        logp -= log_std.sum() + 0.5 * LOG_2PI * self.act_dim
        return logp, (diff, sq, w)

    def logp_grad(self, g, mean, log_std, act, aux):
        """Gradients of ``sum_i g_i logp_i``: w.r.t. the mean (n, k) and the log-std (k,).

        d logp / d mean_j = diff_j w_j,   d logp / d log_std_j = diff_j^2 w_j - 1.
        """
        diff, sq, w = aux
        d_mean = diff * np.dot(g[:, None], w[None, :])  # g_i w_j as a rank-1 product (fast)
        d_log_std = np.dot(g, sq) * w - g.sum()
        return d_mean, d_log_std

    def mean_entropy(self, mean, log_std) -> float:
        return float(np.sum(log_std) + 0.5 * (1.0 + LOG_2PI) * self.act_dim)

    def entropy(self, mean, log_std):
        """Per-row entropy (n,): sum over dimensions of 1/2 + 1/2 log 2 pi + log_std."""
        h = float(np.sum(log_std) + 0.5 * (1.0 + LOG_2PI) * self.act_dim)
        return np.full(len(mean), h, dtype=mean.dtype)

    def entropy_grad(self, g, mean, log_std):
        """Gradients of ``sum_i g_i H_i``: zero w.r.t. the mean, ``sum g`` per log-std component."""
        return np.zeros_like(mean), np.full(self.act_dim, g.sum(), dtype=mean.dtype)

    def kl(self, mean_p, log_std_p, mean_q, log_std_q):
        """Exact KL(p || q) per row (n,)."""
        var_p, var_q = np.exp(2 * log_std_p), np.exp(2 * log_std_q)
        terms = log_std_q - log_std_p + (var_p + (mean_p - mean_q) ** 2) / (2 * var_q) - 0.5
        return terms.sum(axis=1)

    def kl_grad(self, g, mean_p, log_std_p, mean_q, log_std_q):
        """Gradients of ``sum_i g_i KL_i(p || q)`` w.r.t. q's mean (n, k) and log-std (k,)."""
        var_p, var_q = np.exp(2 * log_std_p), np.exp(2 * log_std_q)
        d_mean = g[:, None] * (mean_q - mean_p) / var_q
        d_log_std = (g[:, None] * (1.0 - (var_p + (mean_p - mean_q) ** 2) / var_q)).sum(axis=0)
        return d_mean, d_log_std

    def mode(self, mean):
        return mean


def _softmax(logits):
    p = logits - logits.max(axis=-1, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(axis=-1, keepdims=True)
    return p


class CategoricalHead:
    """Categorical over ``n`` choices; no extra parameters."""

    discrete = True
    n_extra = 0

    def __init__(self, n: int):
        self.act_dim = n

    def logp(self, logits, log_std, act):
        """``(logp (n,), softmax probabilities)``; ``act`` holds integer choices."""
        rows = np.arange(len(logits))
        shifted = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(shifted)
        total = p.sum(axis=1)
        p /= total[:, None]
        return shifted[rows, act] - np.log(total), p

    def logp_grad(self, g, logits, log_std, act, p):
        """d logp_i / d logits_i = onehot(a_i) - softmax_i."""
        d = p * -g[:, None]
        d[np.arange(len(logits)), act] += g
        return d, None

    def entropy(self, logits, log_std):
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return -(np.exp(log_p) * log_p).sum(axis=1)

    def mean_entropy(self, logits, log_std) -> float:
        return float(self.entropy(logits, log_std).mean())

    def entropy_grad(self, g, logits, log_std):
        """d H / d logits_j = -p_j (log p_j + H)."""
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        p = np.exp(log_p)
        h = -(p * log_p).sum(axis=1, keepdims=True)
        return -g[:, None] * p * (log_p + h), None

    def kl(self, logits_p, log_std_p, logits_q, log_std_q):
        lp = logits_p - logits_p.max(axis=1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
        lq = logits_q - logits_q.max(axis=1, keepdims=True)
        lq -= np.log(np.exp(lq).sum(axis=1, keepdims=True))
        return (np.exp(lp) * (lp - lq)).sum(axis=1)

    def kl_grad(self, g, logits_p, log_std_p, logits_q, log_std_q):
        """d KL(p || q) / d logits_q = softmax(q) - softmax(p)."""
        return g[:, None] * (_softmax(logits_q.copy()) - _softmax(logits_p.copy())), None

    def mode(self, logits):
        return np.argmax(logits, axis=-1)


class Policy:
    """The policy MLP plus its head; parameters ``[MLP..., log_std...]`` in one flat vector."""

    def __init__(self, obs_dim: int, act_dim: int, hid, discrete: bool, params: np.ndarray):
        self.sizes = (obs_dim, *hid, act_dim)
        self.head = CategoricalHead(act_dim) if discrete else GaussianHead(act_dim)
        n_mlp = n_params(self.sizes)
        if params.shape != (n_mlp + self.head.n_extra,):
            raise ValueError(f"policy needs {n_mlp + self.head.n_extra} parameters, got {params.shape}")
        self.params = params
        self.grad = np.zeros_like(params)
        self.mlp = MLP(self.sizes, params[:n_mlp], self.grad[:n_mlp])
        self.log_std = params[n_mlp:]  # empty for a categorical head
        self.grad_log_std = self.grad[n_mlp:]

    @staticmethod
    def init_params(
        obs_dim, act_dim, hid, discrete, rng, dtype=np.float32, log_std_init: float = LOG_STD_INIT, ortho: bool = False
    ) -> np.ndarray:
        """PyTorch's default initialisation, or orthogonal (output gain 0.01) with ``ortho``."""
        sizes = (obs_dim, *hid, act_dim)
        mlp = orthogonal_params(sizes, rng, 0.01, dtype) if ortho else init_params(sizes, rng, dtype)
        if discrete:
            return mlp
        return np.concatenate([mlp, np.full(act_dim, log_std_init, dtype)])

    # -- acting ---------------------------------------------------------------------
    def sampler(self):
        """``act(obs, noise, out)`` for one rollout with the current parameters.

        Gaussian: ``noise`` is a row of :meth:`scale_noise` (standard normal x std), the
        action ``mean + noise`` is written to ``out``.  Categorical: ``noise`` is a uniform number in [0, 1) and
        the choice is found by inverting the cumulative probabilities.
        """
        forward1 = self.mlp.forward1
        if self.head.discrete:
            n = self.head.act_dim

            def act(obs, noise, out=None):  # noise: u in [0, 1); out unused
                logits = forward1(obs)
                cum = np.cumsum(np.exp(logits - logits.max()))
                return min(int(np.searchsorted(cum, noise * cum[-1], side="right")), n - 1)
        else:

            def act(obs, noise, out=None):  # noise: the scaled noise row
                return np.add(forward1(obs), noise, out=out)

        return act

    def sample_batch(self, obs: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Actions for a batch of observations (one per env): ``mean + noise`` rows (Gaussian,
        ``noise`` from :meth:`scale_noise`), or choices by inverting the cumulative probabilities
        at the uniform numbers ``noise``."""
        out = self.mlp.forward(obs)
        if not self.head.discrete:
            return out + noise
        n = self.head.act_dim
        choices = np.empty(len(obs), np.int64)
        for i, (logits, u) in enumerate(zip(out, noise)):
            cum = np.cumsum(np.exp(logits - logits.max()))
            choices[i] = min(int(np.searchsorted(cum, u * cum[-1], side="right")), n - 1)
        return choices

    def scale_noise(self, noise: np.ndarray) -> np.ndarray:
        """The rollout's noise as ``act`` takes it: standard normal x std (Gaussian), as is otherwise."""
        return noise if self.head.discrete else noise * np.exp(self.log_std)

    def mode(self, obs):
        """The deterministic action for one observation: the mean, or the most likely choice."""
        out = self.mlp.forward1(obs)
        return int(np.argmax(out)) if self.head.discrete else out.copy()

    # -- learning -------------------------------------------------------------------
    def logp(self, obs, act) -> np.ndarray:
        out = self.mlp.forward(obs)
        return self.head.logp(out, self.log_std, act)[0]

    def surrogate(self, obs, act, adv, logp_old, clip_ratio: float, ent_coef: float = 0.0):
        """PPO-clip loss on this rank's batch, less ``ent_coef`` times the mean entropy; fills
        ``self.grad``.

        Returns ``(loss, approx_kl, entropy, clip_fraction)``, each a mean over the batch.
        """
        n = len(obs)
        out = self.mlp.forward(obs)
        logp, aux = self.head.logp(out, self.log_std, act)
        ratio = np.subtract(logp, logp_old)
        np.exp(ratio, out=ratio)
        unclipped = ratio * adv
        clipped = np.clip(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)
        clip_frac = np.count_nonzero(clipped != ratio) / n
        clipped *= adv
        loss = -float(np.minimum(unclipped, clipped).sum()) / n
        # d loss / d logp_i = -r_i A_i / n where the unclipped term is the minimum, else 0
        g = unclipped * (unclipped <= clipped)
        g *= -1.0 / n
        d_out, d_extra = self.head.logp_grad(g, out, self.log_std, act, aux)
        entropy = self.head.mean_entropy(out, self.log_std)
        if ent_coef:
            loss -= ent_coef * entropy
            d_ent, d_ent_extra = self.head.entropy_grad(np.full(n, -ent_coef / n, dtype=out.dtype), out, self.log_std)
            d_out = d_out + d_ent
            if d_extra is not None:
                d_extra = d_extra + d_ent_extra
        self.mlp.backward(self.mlp.workspace(n), d_out)
        if d_extra is not None:
            self.grad_log_std[...] = d_extra
        approx_kl = float(logp_old.sum() - logp.sum()) / n
        return loss, approx_kl, entropy, clip_frac


class ValueFunction:
    """State-value MLP with one linear output."""

    def __init__(self, obs_dim: int, hid, params: np.ndarray):
        self.sizes = (obs_dim, *hid, 1)
        self.params = params
        self.grad = np.zeros_like(params)
        self.mlp = MLP(self.sizes, params, self.grad)

    @staticmethod
    def init_params(obs_dim, hid, rng, dtype=np.float32, ortho: bool = False) -> np.ndarray:
        """PyTorch's default initialisation, or orthogonal (output gain 1) with ``ortho``."""
        sizes = (obs_dim, *hid, 1)
        return orthogonal_params(sizes, rng, 1.0, dtype) if ortho else init_params(sizes, rng, dtype)

    def values(self, obs) -> np.ndarray:
        """V of a batch of observations, as a new (n,) array."""
        return self.mlp.forward(obs)[:, 0].copy()

    def loss(self, obs, ret) -> float:
        """Mean squared error ``mean((V - ret)^2)``; fills ``self.grad``."""
        n = len(obs)
        ws = self.mlp.workspace(n)
        err = self.mlp.forward(obs, ws) - ret[:, None]
        loss = float(np.einsum("ij,ij->", err, err)) / n
        err *= 2.0 / n
        self.mlp.backward(ws, err)
        return loss
