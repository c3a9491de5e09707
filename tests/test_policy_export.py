"""One loader for evolution and PPO run files, and policies that leave synapto: ONNX models
that act as ``load_policy(path).act`` does, ``.npz`` weight matrices with their layout."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np
import pytest

import synapto
from synapto.common.errors import UsageError

if os.environ.get("SYNAPTO_REQUIRE_EXTRAS"):  # `make test`: the onnx extra is installed, its absence an error
    import onnxruntime as ort
else:
    ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.slow  # the module's runs take ~20 s on 2 cores

BASE = synapto.EvolveConfig(
    env="CartPole-v1",
    agent="pruned-mlp",
    hidden=(4,),
    population=8,
    generations=2,
    episodes=1,
    validate_episodes=2,
    validate_top=0,
    select_episodes=0,
    test_episodes=2,
    strategy="openai-es",
    seed=0,
)


def _ppo(path, env, **kw):
    from synapto.ppo.config import PPOConfig
    from synapto.ppo.train import train

    train(PPOConfig(env=env, hid=(4,), epochs=2, steps_per_epoch=200, **kw), path, log=lambda m: None)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    quiet = dict(log=lambda m: None)
    evolved = {
        # seed 0 with a final selection: the champion is openai-es's final centre
        "mlp-discrete-centre": (BASE, dict(select_episodes=2, obs_norm=True)),
        "mlp-box": (BASE, dict(env="Pendulum-v1", generations=1)),  # bounds [-2, 2]: a scaled tanh head
        "dag-discrete": (BASE, dict(agent="hebbian-dag", obs_norm=True)),
        "dag-box": (BASE, dict(agent="hebbian-dag", env="Pendulum-v1", hidden=(3, 2), generations=1)),
        "plastic": (BASE, dict(agent="hebbian-dag", agent_options={"neuromodulate": True}, generations=1)),
    }
    out = {}
    for name, (cfg, change) in evolved.items():
        out[name] = d / f"{name}.h5"
        synapto.evolve(dataclasses.replace(cfg, **change), out[name], **quiet)
    out["ppo-discrete"] = _ppo(d / "ppo-discrete.h5", "CartPole-v1", obs_norm=True, test_episodes=2)
    out["ppo-box"] = _ppo(d / "ppo-box.h5", "Pendulum-v1")
    return out


EXPORTABLE = ["mlp-discrete-centre", "mlp-box", "dag-discrete", "dag-box", "ppo-discrete", "ppo-box"]


def observations(policy, n=400):
    """Raw observations: from real episodes, and far outside them (saturated units, clipping)."""
    env = policy.make_env()
    seen = []
    obs, _ = env.reset(seed=1)
    for _ in range(n // 2):
        seen.append(np.ravel(obs).astype(np.float64))
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    rng = np.random.default_rng(7)
    wide = rng.normal(size=(n - len(seen), len(seen[0]))) * rng.choice([0.1, 1.0, 10.0], size=(n - len(seen), 1))
    return np.vstack([np.array(seen), wide])


def synapto_actions(policy, obs):
    out = []
    for o in obs:
        policy.reset()
        out.append(policy.act(o))
    return np.array(out)


@pytest.mark.parametrize("obs_dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", EXPORTABLE)
def test_onnx_model_gives_the_actions_of_load_policy(runs, name, obs_dtype, tmp_path):
    """The model takes float32 observations (what deployment code feeds), or float64 with
    ``obs_dtype="float64"``, and casts them to float64 inside: on the same observations it
    makes the very choices of ``load_policy(...).act``, and Box actions within rtol 1e-5,
    atol 1e-6 of them (onnxruntime's tanh and matrix products against numpy's)."""
    policy = synapto.load_policy(runs[name])
    path = policy.to_onnx(tmp_path / "p.onnx", **({} if obs_dtype == "float32" else {"obs_dtype": obs_dtype}))
    obs = observations(policy).astype(obs_dtype)
    session = ort.InferenceSession(str(path))
    assert session.get_inputs()[0].type == {"float32": "tensor(float)", "float64": "tensor(double)"}[obs_dtype]
    got = session.run(None, {"obs": obs})[0]
    want = synapto_actions(policy, obs)
    assert got.shape == want.shape
    if policy.make_env().action_space.shape == ():  # Discrete: the very same choices
        assert got.dtype == np.int64 and np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cli_exports_a_float64_input_when_asked_and_refuses_other_types(runs, tmp_path, capsys):
    code, _, err = run_main(
        "export", runs["mlp-box"], "--onnx", tmp_path / "p.onnx", "--onnx-obs-dtype", "float64", capsys=capsys
    )
    assert code == 0, err
    assert ort.InferenceSession(str(tmp_path / "p.onnx")).get_inputs()[0].type == "tensor(double)"
    code, _, err = run_main(
        "export", runs["mlp-box"], "--onnx", tmp_path / "q.onnx", "--onnx-obs-dtype", "int8", capsys=capsys
    )
    assert (code, err) == (2, "error: --onnx-obs-dtype must be one of float32, float64, got 'int8'\n")
    assert not (tmp_path / "q.onnx").exists()


@pytest.mark.parametrize("name", EXPORTABLE)
def test_npz_layout_is_enough_to_compute_the_actions(runs, name, tmp_path):
    policy = synapto.load_policy(runs[name])
    f = np.load(policy.to_npz(tmp_path / "p.npz"))
    layout = json.loads(str(f["layout"]))
    obs = observations(policy, 100)
    x = obs
    if layout["obs_norm"]:
        x = np.clip((x - f["obs_mean"]) / f["obs_std"], -layout["obs_clip"], layout["obs_clip"])
    acts = [x.astype(layout["dtype"])]
    for i, layer in enumerate(layout["layers"]):
        inp = acts[-1] if layer["input"] == "previous" else np.hstack(acts)
        h = inp @ f[f"layer{i}_weight"] + (f[f"layer{i}_bias"] if layer["bias"] else 0)
        acts.append(np.tanh(h) if layer["activation"] == "tanh" else h)
    out = acts[-1][:, layout["output_start"] : layout["output_start"] + layout["act_dim"]]
    head = layout["head"]
    action = out.argmax(axis=1) if head == "argmax" else out if head == "identity" else np.tanh(out)
    if head == "tanh-scaled":
        action = f["action_low"] + (action + 1.0) * 0.5 * (f["action_high"] - f["action_low"])
    want = synapto_actions(policy, obs)
    if head == "argmax":
        assert np.array_equal(action, want)
    else:
        np.testing.assert_allclose(action, want, rtol=1e-5, atol=1e-6)


def test_load_policy_plays_a_ppo_run_to_its_stored_test_returns(runs):
    policy = synapto.load_policy(runs["ppo-discrete"])
    assert isinstance(policy, synapto.policies.PPOPolicy) and policy.label == "final"
    returns = []
    for seed in policy.test_seeds:
        env, total, done = policy.make_env(), 0.0, False
        obs, _ = env.reset(seed=int(seed))
        policy.reset()
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    assert policy.test_seeds.size == 2 and np.array_equal(returns, policy.test_returns)
    assert policy.fitness == policy.test_returns.mean() and policy.fitness_on == "test"
    with pytest.raises(UsageError, match="evolution runs"):
        synapto.load_policy(runs["ppo-discrete"], generation=0, individual=0)


def test_fitness_of_a_final_centre_is_its_selection_figure(runs):
    import h5py

    policy = synapto.load_policy(runs["mlp-discrete-centre"])
    with h5py.File(runs["mlp-discrete-centre"], "r") as f:
        assert np.isnan(f["champion/fitness"][0])  # the final centre was chosen: never validated
        selected = float(f["champion/selection_fitness"][0])
    assert policy.fitness == selected and policy.fitness_on == "selection"
    assert synapto.load_policy(runs["mlp-box"]).fitness_on == "validation"
    assert synapto.load_policy(runs["mlp-box"], generation=0, individual=1).fitness_on == "training"


def run_main(*args, capsys):
    from synapto.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_cli_exports_onnx_and_npz_and_no_csv(runs, tmp_path, capsys):
    code, out, err = run_main(
        "export", runs["ppo-box"], "--onnx", tmp_path / "d/p.onnx", "--npz", tmp_path / "d/p.npz", capsys=capsys
    )
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["p.npz", "p.onnx"]
    assert not (tmp_path / "csv").exists() and "p.onnx" in out


def test_cli_refuses_a_plastic_agent_in_one_line_and_writes_nothing(runs, tmp_path, capsys):
    with pytest.raises(UsageError, match="plastic"):
        synapto.load_policy(runs["plastic"]).to_onnx(tmp_path / "x.onnx")
    code, _, err = run_main("export", runs["plastic"], "--onnx", tmp_path / "p.onnx", capsys=capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "neuromodulate" in err
    assert not (tmp_path / "p.onnx").exists()


def test_missing_onnx_extra_is_one_line_naming_it(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now fails as if not installed
    code, _, err = run_main("export", runs["mlp-box"], "--onnx", tmp_path / "p.onnx", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "synapto-evo[onnx]" in err
    assert not (tmp_path / "p.onnx").exists()
