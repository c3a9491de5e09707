"""Backpropagation, distribution heads, PPO losses and Adam against finite differences."""

import numpy as np
import pytest

from synapto.ppo.adam import Adam
from synapto.ppo.nn import MLP, init_params, n_params
from synapto.ppo.policy import CategoricalHead, GaussianHead, Policy, ValueFunction


def numeric_grad(f, x, eps=1e-6):
    """Central differences of the scalar f() with respect to every entry of x (in place)."""
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = f()
        flat[i] = old - eps
        down = f()
        flat[i] = old
        g.reshape(-1)[i] = (up - down) / (2 * eps)
    return g


def assert_close(analytic, numeric, rtol=1e-6, atol=1e-8):
    err = np.max(np.abs(analytic - numeric) / (atol + np.abs(numeric)))
    assert np.allclose(analytic, numeric, rtol=rtol, atol=atol), f"max relative error {err}"


#: (rtol, atol) of an analytic gradient computed in this dtype against float64 finite
#: differences; float32 is PPO's default dtype (``--dtype``)
TOL = {np.float64: (1e-6, 1e-8), np.float32: (2e-4, 1e-6)}


def in_dtype(dtype, *arrays):
    """The arrays rounded to ``dtype``, and the same values in float64 (the reference)."""
    low = [np.asarray(a).astype(dtype) for a in arrays]
    return low, [a.astype(np.float64) for a in low]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sizes", [(3, 5, 4, 2), (6, 1), (2, 7, 3)])
def test_mlp_backward_matches_finite_differences(sizes, dtype):
    rng = np.random.default_rng(0)
    (params, x, w), (params64, x64, w64) = in_dtype(
        dtype, init_params(sizes, rng) * 2.0, rng.standard_normal((9, sizes[0])), rng.standard_normal((9, sizes[-1]))
    )
    mlp, mlp64 = MLP(sizes, params), MLP(sizes, params64)  # loss = sum(w * y)

    mlp.forward(x)
    analytic = mlp.backward(mlp.workspace(9), w.copy()).copy()
    assert analytic.dtype == dtype and params.size == n_params(sizes)
    assert_close(analytic, numeric_grad(lambda: float(np.sum(w64 * mlp64.forward(x64))), params64), *TOL[dtype])


def test_mlp_single_row_forward_matches_batch():
    rng = np.random.default_rng(1)
    sizes = (4, 8, 8, 3)
    mlp = MLP(sizes, init_params(sizes, rng))
    x = rng.standard_normal((5, 4))
    batch = mlp.forward(x).copy()
    for i in range(5):
        np.testing.assert_allclose(mlp.forward1(x[i]), batch[i], rtol=1e-12, atol=1e-14 * 100)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-15), (np.float32, 3e-7)])
def test_fast_tanh(dtype, tol):
    from synapto.common.fastmath import tanh_

    x = np.concatenate([np.linspace(-30, 30, 10001), [-1e5, 1e5, 0.0, 1e-9]]).astype(dtype)
    with np.errstate(all="raise"):
        y = tanh_(x.copy())
    assert y.dtype == dtype
    assert np.max(np.abs(y - np.tanh(x.astype(np.float64)))) < tol
    assert y[-4] == -1 and y[-3] == 1


def test_init_is_pytorch_linear_default_and_seeded():
    sizes = (16, 32, 4)
    a = init_params(sizes, np.random.default_rng(5))
    b = init_params(sizes, np.random.default_rng(5))
    assert a.tobytes() == b.tobytes()
    W1 = a[: 16 * 32]
    assert np.abs(W1).max() <= 1 / np.sqrt(16) and np.abs(W1).max() > 0.9 / np.sqrt(16)


# ----------------------------------------------------------------------------- heads
def gaussian_case(rng, n=6, k=3):
    mean = rng.standard_normal((n, k))
    log_std = rng.uniform(-1, 0.5, k)
    act = mean + np.exp(log_std) * rng.standard_normal((n, k))
    return mean, log_std, act


def test_gaussian_logp_is_the_normal_density():
    rng = np.random.default_rng(2)
    mean, log_std, act = gaussian_case(rng)
    logp, _ = GaussianHead(3).logp(mean, log_std, act)
    std = np.exp(log_std)
    expected = np.sum(-0.5 * ((act - mean) / std) ** 2 - np.log(std * np.sqrt(2 * np.pi)), axis=1)
    np.testing.assert_allclose(logp, expected, rtol=1e-12)


def test_gaussian_gradients():
    rng = np.random.default_rng(3)
    head = GaussianHead(3)
    mean, log_std, act = gaussian_case(rng)
    g = rng.standard_normal(6)
    _, z = head.logp(mean, log_std, act)
    d_mean, d_ls = head.logp_grad(g, mean, log_std, act, z)
    f = lambda: float(g @ head.logp(mean, log_std, act)[0])  # noqa: E731
    assert_close(d_mean, numeric_grad(f, mean))
    assert_close(d_ls, numeric_grad(f, log_std))

    e_mean, e_ls = head.entropy_grad(g, mean, log_std)
    f = lambda: float(g @ head.entropy(mean, log_std))  # noqa: E731
    assert_close(e_ls, numeric_grad(f, log_std))
    assert not e_mean.any()

    mean_q, ls_q = mean + 0.3 * rng.standard_normal(mean.shape), log_std + 0.2
    k_mean, k_ls = head.kl_grad(g, mean, log_std, mean_q, ls_q)
    f = lambda: float(g @ head.kl(mean, log_std, mean_q, ls_q))  # noqa: E731
    assert_close(k_mean, numeric_grad(f, mean_q))
    assert_close(k_ls, numeric_grad(f, ls_q))
    assert np.all(head.kl(mean, log_std, mean_q, ls_q) > 0)
    np.testing.assert_allclose(head.kl(mean, log_std, mean, log_std), 0, atol=1e-12)


def test_gaussian_kl_matches_monte_carlo():
    rng = np.random.default_rng(4)
    head = GaussianHead(2)
    mp, lp, mq, lq = np.zeros((1, 2)), np.array([0.0, -0.5]), np.array([[0.5, -0.2]]), np.array([0.2, -0.1])
    x = mp + np.exp(lp) * rng.standard_normal((200_000, 2))
    mc = np.mean(head.logp(np.repeat(mp, len(x), 0), lp, x)[0] - head.logp(np.repeat(mq, len(x), 0), lq, x)[0])
    assert abs(head.kl(mp, lp, mq, lq)[0] - mc) < 0.01


def test_categorical_gradients_and_values():
    rng = np.random.default_rng(5)
    head = CategoricalHead(4)
    logits = rng.standard_normal((7, 4)) * 2
    act = rng.integers(0, 4, 7)
    g = rng.standard_normal(7)
    logp, p = head.logp(logits, None, act)
    expected_p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(logp, np.log(expected_p[np.arange(7), act]), rtol=1e-12)
    np.testing.assert_allclose(head.entropy(logits, None), -(expected_p * np.log(expected_p)).sum(1), rtol=1e-12)

    d, _ = head.logp_grad(g, logits, None, act, p)
    assert_close(d, numeric_grad(lambda: float(g @ head.logp(logits, None, act)[0]), logits))
    d, _ = head.entropy_grad(g, logits, None)
    assert_close(d, numeric_grad(lambda: float(g @ head.entropy(logits, None)), logits))
    other = logits + rng.standard_normal(logits.shape)
    d, _ = head.kl_grad(g, logits, None, other, None)
    assert_close(d, numeric_grad(lambda: float(g @ head.kl(logits, None, other, None)), other))


# ------------------------------------------------------------------------------ losses
@pytest.mark.parametrize("ent_coef", [0.0, 0.05])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("discrete", [False, True])
def test_ppo_clip_surrogate_gradient(discrete, dtype, ent_coef):
    """The policy gradient PPO computes in ``dtype`` (float32 by default) against float64
    finite differences of the same loss at the same (rounded) values; with an entropy
    bonus, the loss less ``ent_coef`` times the mean entropy."""
    rng = np.random.default_rng(6)
    obs_dim, act_dim, hid, n = 5, 3, (8, 6), 40
    params = Policy.init_params(obs_dim, act_dim, hid, discrete, rng, np.float64)
    obs = rng.standard_normal((n, obs_dim))
    act = rng.integers(0, act_dim, n) if discrete else rng.standard_normal((n, act_dim))
    adv = rng.standard_normal(n)
    # old log-probs from nearby parameters, so that some ratios are clipped and some not
    old = Policy(obs_dim, act_dim, hid, discrete, params + 0.1 * rng.standard_normal(params.size))
    logp_old = old.logp(obs, act)
    (params, obs, adv, logp_old), (params64, obs64, adv64, logp_old64) = in_dtype(dtype, params, obs, adv, logp_old)
    act, act64 = (act, act) if discrete else (act.astype(dtype), act.astype(dtype).astype(np.float64))
    pi, pi64 = Policy(obs_dim, act_dim, hid, discrete, params), Policy(obs_dim, act_dim, hid, discrete, params64)
    loss, kl, ent, clip_frac = pi.surrogate(obs, act, adv, logp_old, 0.2, ent_coef)
    assert 0 < clip_frac < 1
    analytic = pi.grad.copy()
    assert analytic.dtype == dtype
    numeric = numeric_grad(lambda: pi64.surrogate(obs64, act64, adv64, logp_old64, 0.2, ent_coef)[0], params64)
    rtol, atol = (1e-5, 1e-9) if dtype == np.float64 else TOL[dtype]
    assert_close(analytic, numeric, rtol=rtol, atol=atol)

    # the loss itself, written out
    rel = 1e-12 if dtype == np.float64 else 1e-5
    ratio = np.exp(pi64.logp(obs64, act64) - logp_old64)
    expected = -np.mean(np.minimum(ratio * adv64, np.clip(ratio, 0.8, 1.2) * adv64))
    out = pi64.mlp.forward(obs64)
    entropy = pi64.head.entropy(out, pi64.log_std).mean()
    absolute = 1e-12 if dtype == np.float64 else 1e-6  # float32 sums of n terms near 0
    assert loss == pytest.approx(expected - ent_coef * entropy, rel=rel, abs=absolute)
    assert ent == pytest.approx(entropy, rel=rel, abs=absolute)
    assert kl == pytest.approx(np.mean(logp_old64 - pi64.logp(obs64, act64)), rel=rel, abs=1e-7)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_value_loss_gradient(dtype):
    rng = np.random.default_rng(7)
    (params, obs, ret), (params64, obs64, ret64) = in_dtype(
        dtype,
        ValueFunction.init_params(4, (5, 5), rng, np.float64),
        rng.standard_normal((12, 4)),
        rng.standard_normal(12),
    )
    vf, vf64 = ValueFunction(4, (5, 5), params), ValueFunction(4, (5, 5), params64)
    loss = vf.loss(obs, ret)
    assert loss == pytest.approx(np.mean((vf64.values(obs64) - ret64) ** 2), rel=1e-12 if dtype == np.float64 else 1e-5)
    analytic = vf.grad.copy()
    assert analytic.dtype == dtype
    assert_close(analytic, numeric_grad(lambda: vf64.loss(obs64, ret64), params64), *TOL[dtype])


def test_adam_matches_the_formula_and_restores_state():
    rng = np.random.default_rng(8)
    p = rng.standard_normal(5)
    q = p.copy()
    opt = Adam(5, lr=0.01)
    m = v = np.zeros(5)
    grads = rng.standard_normal((4, 5))
    for t, g in enumerate(grads, 1):
        opt.step(p, g)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        q = q - 0.01 / (1 - 0.9**t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999**t) + 1e-8)
    np.testing.assert_allclose(p, q, rtol=1e-12)
    again = Adam(5, lr=0.01)
    again.load_state(opt.state())
    p2 = p.copy()
    opt.step(p, grads[0])
    again.step(p2, grads[0])
    assert p.tobytes() == p2.tobytes()
