"""A stored champion in your own loop, and exported for other tools (ONNX, numpy).

    python examples/load_and_export.py RUN.h5   # any evolution or PPO run file
    python examples/load_and_export.py          # makes a CartPole-v1 run first (under a minute)
    python examples/load_and_export.py --tiny   # ... a two-generation one (a few seconds)

``synapto.load_policy`` gives the run's champion acting exactly as in the run (its observation
normalisation included): replaying a test episode from its seed in a fresh environment gives
the stored return bit for bit.  ``to_npz`` writes its weight matrices and how they chain;
``to_onnx`` (the ``onnx`` extra) a model of the whole policy, checked here with onnxruntime
against ``policy.act`` on the observations of that episode.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import synapto

TINY = "--tiny" in sys.argv[1:]
OUT = Path("runs/examples")


def make_run() -> Path:
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(4,),
        strategy="openai-es",
        strategy_options={"sigma": 0.1, "lr": 0.03, "prune": False},
        population=8 if TINY else 16,
        generations=2 if TINY else 40,
        episodes=1,
        validate_top=1,
        validate_episodes=2 if TINY else 4,
        test_episodes=3 if TINY else 100,
        seed=1,
    )
    out = OUT / "export.h5"
    synapto.evolve(cfg, out, force=True, log=lambda line: None)
    return out


def replay_first_test_episode(policy) -> tuple[float, np.ndarray]:
    """The champion's first test episode, replayed: its return and every observation seen."""
    env = policy.make_env()
    obs, _ = env.reset(seed=int(policy.test_seeds[0]))
    policy.reset()
    seen, total, done = [obs], 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
        seen.append(obs)
        total, done = total + float(reward), terminated or truncated
    policy.end_episode()
    return total, np.array(seen[:-1])


def check_onnx(policy, path: Path, observations: np.ndarray) -> None:
    try:
        import onnxruntime
    except ImportError:
        print("onnx: skipped (the onnx extra: pip install 'synapto-evo[onnx]')")
        return
    policy.to_onnx(path)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0]
    dtype = np.float32 if feed.type == "tensor(float)" else np.float64  # the model says what it takes
    onnx_actions = session.run(None, {feed.name: observations.astype(dtype)})[0]
    policy.reset()
    own_actions = np.array([policy.act(o) for o in observations])
    same = int(np.sum(np.all(np.reshape(onnx_actions == own_actions, (len(observations), -1)), axis=1)))
    print(f"onnx: {path}, {same} of {len(observations)} actions equal to policy.act")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    args = [a for a in sys.argv[1:] if a != "--tiny"]
    run = Path(args[0]) if args else make_run()
    policy = synapto.load_policy(run)
    print(f"{run}: {policy.description}")
    if len(policy.test_seeds):
        total, observations = replay_first_test_episode(policy)
        stored = policy.test_returns[0]
        print(f"replayed test episode 0: return {total}, stored {stored}, equal: {total == stored}")
    else:
        env = policy.make_env()
        observations = np.array([env.reset(seed=k)[0] for k in range(16)])
    npz = policy.to_npz(OUT / "champion.npz")
    with np.load(npz) as f:
        layout = json.loads(str(f["layout"]))
        print(f"npz: {npz}, {len(layout['layers'])} layer(s), arrays {sorted(f.files)}")
    check_onnx(policy, OUT / "champion.onnx", observations)


if __name__ == "__main__":
    main()
