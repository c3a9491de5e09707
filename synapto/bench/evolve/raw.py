"""``bench evolve``: the raw-environment ceiling -- the run's own episodes replayed on bare
environments (no synapto in the loop), beside synapto's ``evaluate`` on the same evaluations."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from synapto.agents import build_agent
from synapto.bench.common import child_env
from synapto.common.errors import UsageError
from synapto.envs import make_env
from synapto.evolution.config import EvolveConfig
from synapto.evolution.worker.spec import EvolveSpec
from synapto.evolution.worker.tasks import Episodes, EvalTask
from synapto.store import RunData


def build_sample(run_path: Path, budget: int, seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """Evaluations drawn from a run (seeded) until ``budget`` env steps, with the
    actions their agents took, recorded by re-running them here (not timed).  Each
    re-run must give the stored episode returns bit for bit."""
    with RunData(run_path, kind="evolve") as run:
        cfg = run.config
        agent = build_agent(EvolveConfig.from_json(run.config_json))
        steps = np.asarray(run.steps())
        nonfinite = np.asarray(run.nonfinite())
        order = np.random.default_rng(seed).permutation(steps.size)
        picks, total = [], 0
        for flat in order:
            g, i = divmod(int(flat), steps.shape[1])
            if nonfinite[g, i] or steps[g, i] == 0:
                continue
            picks.append((g, i))
            total += int(steps[g, i])
            if total >= budget:
                break
        items = [
            (g, i, np.asarray(run.population(g, i)), np.asarray(run.seeds(g, i)), np.asarray(run.returns(g, i)))
            for g, i in picks
        ]
    evaluations, mismatches = [], 0
    for g, i, genome, seeds, returns in items:
        policy = agent.policy(genome)
        episodes = []
        for e, s in enumerate(seeds):
            total_r, actions = _replay(cfg["env"], policy, int(s))
            mismatches += total_r != returns[e]
            episodes.append((int(s), actions))
        evaluations.append({"generation": g, "individual": i, "genome": genome, "seeds": seeds, "episodes": episodes})
    if mismatches:
        log(f"warning: {mismatches} re-run episode(s) of {run_path} differ from the stored returns")
    return {
        "env": cfg["env"],
        "agent": cfg["agent"],
        "hidden": tuple(cfg["hidden"]),
        "agent_options": cfg.get("agent_options", {}),
        "evaluations": evaluations,
        "steps": int(sum(len(a) for ev in evaluations for _, a in ev["episodes"])),
        "episodes": int(sum(len(ev["episodes"]) for ev in evaluations)),
        "mismatches": int(mismatches),
    }


def _replay(env_id: str, policy, seed: int) -> tuple[float, list]:
    """One episode of ``policy`` on a fresh ``env_id`` reset with ``seed``: its return and actions."""
    env = make_env(env_id)
    obs, _ = env.reset(seed=seed)
    policy.reset()
    actions, total_r = [], 0.0
    while True:
        a = policy.act(obs)
        actions.append(a)
        obs, r, terminated, truncated, _ = env.step(a)
        total_r += float(r)
        if terminated or truncated:
            break
    env.close()
    policy.end_episode()
    return total_r, actions


def raw_process(sample_path: str, out_path: str) -> None:
    """One raw-ceiling process: replay the sample's evaluations three ways,
    interleaved (rotating order) so that a change of machine load hits all three:
    fresh env per episode, one reused env, and synapto's ``evaluate``."""
    with open(sample_path, "rb") as fh:
        sample = pickle.load(fh)
    env_id = sample["env"]
    evaluator = EvolveSpec(env_id, sample["agent"], tuple(sample["hidden"]), dict(sample["agent_options"])).build()
    clock, cpu = time.perf_counter, time.thread_time
    acc: dict[str, Any] = {
        m: dict(make=0.0, reset=0.0, step=0.0, close=0.0, wall=0.0, cpu=0.0, steps=0, episodes=0)
        for m in ("fresh", "reuse", "synapto")
    }
    reuse_env = make_env(env_id)

    def syn(ev, a):
        r = evaluator(EvalTask(ev["genome"], Episodes(ev["seeds"])))
        a["steps"] += int(r.steps.sum())
        a["episodes"] += len(r.steps)

    modes = (
        ("fresh", lambda ev, a: _replay_fresh(env_id, ev, a)),
        ("reuse", lambda ev, a: _replay_reused(reuse_env, ev, a)),
        ("synapto", syn),
    )
    _replay_fresh(env_id, sample["evaluations"][0], acc["fresh"])  # warm-up (first-call costs), not counted
    for a in acc.values():
        a.update(make=0.0, reset=0.0, step=0.0, close=0.0, steps=0, episodes=0)
    for k, ev in enumerate(sample["evaluations"]):
        for j in range(3):
            name, fn = modes[(k + j) % 3]
            w, c = clock(), cpu()
            fn(ev, acc[name])
            acc[name]["cpu"] += cpu() - c
            acc[name]["wall"] += clock() - w
    reuse_env.close()
    acc["clock_s"] = _clock_cost()
    with open(out_path, "w") as out:
        json.dump(acc, out)


def _replay_fresh(env_id: str, ev: dict, a: dict) -> None:
    """``ev``'s episodes, each in a new env; make, reset, step and close timed into ``a``."""
    clock = time.perf_counter
    for seed, actions in ev["episodes"]:
        t0 = clock()
        env = make_env(env_id)
        t1 = clock()
        env.reset(seed=seed)
        t2 = clock()
        step, n = env.step, 0
        for act in actions:
            n += 1
            _, _, terminated, truncated, _ = step(act)
            if terminated or truncated:
                break
        t3 = clock()
        env.close()
        t4 = clock()
        a["make"] += t1 - t0
        a["reset"] += t2 - t1
        a["step"] += t3 - t2
        a["close"] += t4 - t3
        a["steps"] += n
        a["episodes"] += 1


def _replay_reused(env, ev: dict, a: dict) -> None:
    """``ev``'s episodes in one reused ``env``; reset and step timed into ``a``."""
    clock = time.perf_counter
    for seed, actions in ev["episodes"]:
        t1 = clock()
        env.reset(seed=seed)
        t2 = clock()
        step, n = env.step, 0
        for act in actions:  # state leaks across reset: the episode may end elsewhere
            n += 1
            _, _, terminated, truncated, _ = step(act)
            if terminated or truncated:
                break
        a["reset"] += t2 - t1
        a["step"] += clock() - t2
        a["steps"] += n
        a["episodes"] += 1


def _clock_cost() -> float:
    """Seconds of one clock read, loop included; best of 5 against load."""
    clock = time.perf_counter
    n, best = 20_000, math.inf
    for _ in range(5):
        t = clock()
        for _ in range(n):
            clock()
        best = min(best, (clock() - t) / n)
    return best


def measure_raw(sample_path: Path, concurrency: int, tag: str) -> dict:
    """``concurrency`` raw processes at once; their figures summed (they did the same work)."""
    outs = [sample_path.with_name(f"{sample_path.stem}_{tag}_{k}.json") for k in range(concurrency)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "synapto.bench.evolve", "raw", str(sample_path), str(o)], env=child_env()
        )
        for o in outs
    ]
    rcs = [p.wait() for p in procs]
    if any(rcs):
        raise UsageError(f"raw-environment measurement failed (exit codes {rcs})")
    results = [json.loads(o.read_text()) for o in outs]
    total: dict[str, Any] = {
        m: {k: float(sum(r[m][k] for r in results)) for k in results[0][m]} for m in ("fresh", "reuse", "synapto")
    }
    total["clock_s"] = float(np.mean([r["clock_s"] for r in results]))
    total["processes"] = concurrency
    return total


def ceiling(raw: dict, steps: int, episodes: int, mode: str = "fresh") -> float:
    """Raw env steps/s of one process for ``episodes`` episodes of ``steps`` steps in
    all, from the per-episode and per-step costs measured in ``raw[mode]``."""
    r = raw[mode]
    if not r["steps"] or not r["episodes"]:
        return math.nan
    per_episode = (r["make"] + r["reset"] + r["close"]) / r["episodes"]
    per_step = r["step"] / r["steps"]
    return steps / (episodes * per_episode + steps * per_step)


def raw_summary(raw: dict) -> dict:
    f, u, s = raw["fresh"], raw["reuse"], raw["synapto"]
    return {
        "processes": raw["processes"],
        "make_ms": 1e3 * f["make"] / max(f["episodes"], 1),
        "reset_ms": 1e3 * f["reset"] / max(f["episodes"], 1),
        "close_ms": 1e3 * f["close"] / max(f["episodes"], 1),
        "step_us": 1e6 * f["step"] / max(f["steps"], 1),
        "reuse_reset_ms": 1e3 * u["reset"] / max(u["episodes"], 1),
        "reuse_step_us": 1e6 * u["step"] / max(u["steps"], 1),
        "fresh_steps_per_s": f["steps"] / f["wall"] if f["wall"] else math.nan,
        "synapto_steps_per_s": s["steps"] / s["wall"] if s["wall"] else math.nan,
        # same evaluations, same trajectories: synapto's evaluate against the bare env
        "worker_ratio_wall": (f["wall"] / f["steps"]) / (s["wall"] / s["steps"]) if s["wall"] else math.nan,
        "worker_ratio_cpu": (f["cpu"] / f["steps"]) / (s["cpu"] / s["steps"]) if s["cpu"] else math.nan,
        "clock_ns": 1e9 * raw["clock_s"],
        "sample_steps": int(f["steps"] / max(raw["processes"], 1)),
        "sample_episodes": int(f["episodes"] / max(raw["processes"], 1)),
    }
