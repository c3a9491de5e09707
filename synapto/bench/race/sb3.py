"""Stable-Baselines3 in the race: ``bench race --sb3 tqc`` (or ``sac``).

What a user would pick instead of evolution: Stable-Baselines3's SAC, or sb3-contrib's
TQC, with rl-baselines3-zoo's tuned settings for the task (:data:`ZOO`), on the race's
cores (one process, ``torch.set_num_threads(cores)``).  The run
(:mod:`synapto.bench.race.sb3_train`, a process of its own) keeps its actor every
``n_timesteps / 50`` env steps, and more often under ``--max-minutes`` (every
``M / (4 x points)`` minutes), with the env steps and the wall time of its own clock
at each; the race tests ``--points`` of them, spread evenly, and the last, on PPO's
test stream: episode ``e`` starts from ``reset(seed=int_seed(seed, PPO_TEST, e))`` in a
fresh env (:func:`synapto.ppo.evaluate.test_policy` does the same for PPO), the
actor's deterministic action at every step, to the env's own time limit.

The ``sb3`` extra (``pip install 'synapto-evo[sb3]'``: torch, stable-baselines3,
sb3-contrib) is needed: :func:`require_extra` refuses in one line without it.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from synapto.bench.common import children_cpu, run_logged
from synapto.bench.compare import Curve, Point, spread
from synapto.bench.race import load as race_load
from synapto.common.errors import UsageError
from synapto.common.seeding import Stream, int_seed
from synapto.envs import make_env

#: the modules an algorithm needs, and where its class lives
ALGOS = {"tqc": ("sb3_contrib", "TQC"), "sac": ("stable_baselines3", "SAC")}

_BIPEDAL: dict[str, Any] = {
    "n_timesteps": 500_000,
    "learning_rate": 7.3e-4,
    "buffer_size": 300_000,
    "batch_size": 256,
    "ent_coef": "auto",
    "gamma": 0.98,
    "tau": 0.02,
    "train_freq": 64,
    "gradient_steps": 64,
    "learning_starts": 10_000,
    "use_sde": True,
    "policy_kwargs": {"log_std_init": -3, "net_arch": [400, 300]},
}
_LANDER: dict[str, Any] = {
    "n_timesteps": 500_000,
    "learning_rate": "lin_7.3e-4",
    "buffer_size": 1_000_000,
    "batch_size": 256,
    "ent_coef": "auto",
    "gamma": 0.99,
    "tau": 0.01,
    "train_freq": 1,
    "gradient_steps": 1,
    "learning_starts": 10_000,
    "policy_kwargs": {"net_arch": [400, 300]},
}
_PENDULUM: dict[str, Any] = {"n_timesteps": 20_000, "learning_rate": 1e-3}

#: rl-baselines3-zoo's tuned settings (its hyperparams/tqc.yml and hyperparams/sac.yml),
#: per algorithm and task; a setting left out is the algorithm's default.  "lin_X": a
#: learning rate falling linearly from X to 0 over the run.  BipedalWalker-v3 and
#: LunarLanderContinuous have the same settings for both algorithms there.
ZOO = {
    "tqc": {"BipedalWalker-v3": _BIPEDAL, "LunarLanderContinuous-v3": _LANDER, "Pendulum-v1": _PENDULUM},
    "sac": {"BipedalWalker-v3": _BIPEDAL, "LunarLanderContinuous-v3": _LANDER, "Pendulum-v1": _PENDULUM},
}
#: checkpoints kept over a whole run (more under --max-minutes)
SAVES = 50


def require_extra(algo: str, import_module=importlib.import_module) -> None:
    """Refuse in one line when the ``sb3`` extra (or the algorithm's package) is missing."""
    missing = []
    for name in dict.fromkeys(("torch", "stable_baselines3", ALGOS[algo][0])):
        try:
            import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise UsageError(
            f"bench race --sb3 {algo} needs the sb3 extra ({', '.join(missing)} missing): "
            f"pip install 'synapto-evo[sb3]' (torch, stable-baselines3, sb3-contrib)"
        )


def method(algo: str) -> str:
    """The method's name in race.json: ``sb3-tqc``, ``sb3-sac``."""
    return f"sb3-{algo}"


def settings(algo: str, env: str) -> dict:
    """rl-zoo's settings of ``algo`` on ``env`` (one-line error where the table has none)."""
    table = ZOO[algo]
    if env not in table:
        raise UsageError(
            f"--sb3 {algo}: no rl-baselines3-zoo settings for {env} here; tasks with settings: {', '.join(table)}"
        )
    return dict(table[env])


def spec(algo: str, env: str, seed: int, cores: int, max_minutes: float | None, points: int) -> dict:
    """What the training process needs (written to its folder as spec.json)."""
    zoo = settings(algo, env)
    steps = int(zoo["n_timesteps"])
    return {
        "algo": algo,
        "env": env,
        "seed": seed,
        "threads": cores,
        "settings": zoo,
        "max_seconds": None if max_minutes is None else 60.0 * max_minutes,
        "save_every_steps": max(steps // SAVES, 1),
        "save_every_s": None if max_minutes is None else 60.0 * max_minutes / (4 * points),
    }


def command(folder: Path) -> list[str]:
    return [sys.executable, "-m", "synapto.bench.race.sb3_train", str(folder / "spec.json")]


def run_sb3(algo, task, seed, cores, out_dir: Path, max_minutes, points, log=print) -> dict:
    """Train one SB3 run on ``cores`` cores (a folder of checkpoints); what it cost."""
    tag = "".join(c if c.isalnum() else "_" for c in task)
    folder = out_dir / "runs" / f"{method(algo)}_{tag}_s{seed}_c{cores}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps(spec(algo, task, seed, cores, max_minutes, points), indent=1))
    load = race_load.measure()
    log(f"race: {method(algo)} {task} seed {seed} on {cores} cores (other load {load['busy_cores']:.2f} cores) ...")
    cpu0, t0 = children_cpu(), time.perf_counter()
    limit = None if max_minutes is None else 60.0 * max_minutes + 120.0  # it stops itself at the cap
    done = run_logged(command(folder), folder / "train.log", timeout=limit)
    progress = folder / "progress.json"
    stopped = done.timed_out or (progress.exists() and json.loads(progress.read_text())["stopped_at_cap"])
    return {
        "method": method(algo),
        "task": task,
        "seed": seed,
        "cores": cores,
        "workers": None,
        "shared_coordinator": False,
        "processes": 1,
        "config": f"rl-baselines3-zoo {algo} {task}",
        "out": str(folder),
        "command": " ".join(command(folder)[1:]),
        "process_wall_s": time.perf_counter() - t0,
        "cpu_s": children_cpu() - cpu0,
        "load_before": load,
        "max_minutes": max_minutes,
        "stopped_at_cap": stopped,
    }


def actor_class(algo: str):
    module = importlib.import_module(f"{ALGOS[algo][0]}.{algo}.policies")
    return module.Actor


def test_actor(algo: str, env_id: str, path: Path, seed: int, episodes: int) -> np.ndarray:
    """Returns of ``episodes`` test episodes of a kept actor on PPO's test stream."""
    import torch

    torch.set_num_threads(1)
    actor = actor_class(algo).load(str(path), device="cpu")
    returns = np.zeros(episodes)
    for e in range(episodes):
        env = make_env(env_id)
        obs, _ = env.reset(seed=int_seed(seed, Stream.PPO_TEST, e))
        done = False
        while not done:
            action, _ = actor.predict(obs, deterministic=True)
            obs, r, terminated, truncated, _ = env.step(action)
            returns[e] += r
            done = terminated or truncated
        env.close()
    return returns


def sb3_curve(run: dict, points: int, episodes: int, cache, log):
    """The run's tested points (a :class:`synapto.bench.compare.Curve`): ``points`` kept
    actors spread over the run, then its last one."""
    folder = Path(run["out"])
    progress = json.loads((folder / "progress.json").read_text())
    algo, env, seed = progress["algo"], progress["env"], progress["seed"]
    kept = progress["checkpoints"]
    if not kept:
        raise UsageError(f"{str(folder)!r}: the SB3 run kept no actor (see its train.log)")
    picks = [*spread(list(range(len(kept) - 1)), points), len(kept) - 1]
    label = f"SB3 {algo.upper()}, rl-zoo settings"
    curve = Curve(str(folder), run["method"], env, label, seed, finished=progress["finished"])
    for i in picks:
        c = kept[i]
        log(f"  {folder.name}: actor at {c['env_steps']} env steps on {episodes} test episodes")
        mean, std = cache.get(
            f"{progress['run_id']}:{c['file']}:{episodes}",
            lambda c=c: test_actor(algo, env, folder / c["file"], seed, episodes),
        )
        last = i == len(kept) - 1
        name = "final" if last and progress["finished"] else f"steps {c['env_steps']}"
        curve.points.append(Point(int(c["env_steps"]), float(c["wall_s"]), name, mean, std))
    return curve
