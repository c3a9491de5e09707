"""One race run: ``synapto evolve`` or ``synapto ppo`` on a given number of cores, its
command, wall time, CPU seconds, then its tested curve and threshold figures.

* evolution on ``W + 1`` cores: ``--workers W`` (W workers and the coordinator);
* PPO on the same cores: ``--cpu P`` with ``P`` the most processes, at most ``W + 1``,
  over which the config's ``n_envs`` split evenly (``synapto.ppo.train.local_envs``;
  with ``n_envs = 1`` every process has one env, so ``P = W + 1``).  A race of
  LunarLander's 16 envs at 2 workers (3 cores) runs PPO on 2 processes: the table says so;
* with a shared coordinator, ``W`` cores: evolution's ``W`` workers and its coordinator
  (3 processes on 2 cores at ``W = 2``), PPO at most ``W`` processes.

CPU seconds are the user + system time of the command and every process under it
(``getrusage(RUSAGE_CHILDREN)`` before and after: mpiexec and its proxies wait for
their ranks, so the ranks' time reaches it).

Under ``--max-minutes M`` a run is sent SIGTERM after ``M`` minutes (evolution saves the
checkpoint of its last generation and stops; PPO stops with its last epoch on disk),
and its tested points are those it kept: a threshold counts as reached only at a point
of the run's own clock within ``M`` minutes, and ``score_within_cap`` is the test of
its last point within them.

A task's thresholds (``--threshold ENV=X[,Y...]``, repeatable) may be several (a race is
read at 280 and at 300 on BipedalWalker-v3); the first is the one its runs table and
ratios use.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from synapto.bench.common import children_cpu, run_logged
from synapto.bench.compare import THRESHOLDS, Cache, Curve, evolve_curve, ppo_curve, threshold_item
from synapto.bench.race.load import measure
from synapto.bench.race.sb3 import sb3_curve
from synapto.common.errors import UsageError


def ppo_processes(n_envs: int, cores: int) -> int:
    """The most processes, at most ``cores``, that split ``n_envs`` evenly."""
    if n_envs == 1:
        return cores
    return max(p for p in range(1, min(cores, n_envs) + 1) if n_envs % p == 0)


def command(method: str, config: str, workers: int, processes: int, seed: int, out: Path) -> list[str]:
    base = [sys.executable, "-m", "synapto", method, "--config", str(config), "--seed", str(seed), "--out", str(out)]
    base += ["--force"]
    return base + (["--workers", str(workers)] if method == "evolve" else ["--cpu", str(processes)])


def run_method(
    method: str,
    config: str,
    workers: int,
    processes: int,
    cores: int,
    seed: int,
    out_dir: Path,
    task: str,
    log=print,
    max_minutes: float | None = None,
) -> dict:
    """Run one method once on ``cores`` cores; what it cost (wall, CPU) and the load just before it."""
    tag = "".join(c if c.isalnum() else "_" for c in task)
    shared = "_shared" if cores == workers else ""
    out = out_dir / "runs" / f"{method}_{tag}_s{seed}_c{cores}{shared}.h5"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = command(method, config, workers, processes, seed, out)
    load = measure()
    log(
        f"race: {method} {task} seed {seed} on {cores} cores ({processes} processes; other load "
        f"{load['busy_cores']:.2f} cores) ..."
    )
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = run_logged(cmd, out.with_suffix(".log"), timeout=None if max_minutes is None else 60.0 * max_minutes)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    return {
        "method": method,
        "task": task,
        "seed": seed,
        "cores": cores,
        "workers": workers,
        "shared_coordinator": cores == workers,
        "processes": processes,
        "config": str(config),
        "out": str(out),
        "command": " ".join(cmd[1:]),
        "process_wall_s": wall,
        "cpu_s": cpu,
        "load_before": load,
        "max_minutes": max_minutes,
        "stopped_at_cap": done.timed_out,
    }


def reach(curve: list[dict], threshold: float, max_minutes: float | None = None) -> dict | None:
    """The first tested point (of a run's ``curve`` in race.json) whose mean is at least
    ``threshold`` and, with ``max_minutes``, within that many minutes of the run's clock."""
    cap = math.inf if max_minutes is None else 60.0 * max_minutes
    return next((p for p in curve if p["test_mean"] >= threshold and p["wall_s"] <= cap), None)


def within_cap(curve: list[dict], max_minutes: float | None) -> float | None:
    """The test mean of the last tested point within ``max_minutes`` (None: no point)."""
    cap = math.inf if max_minutes is None else 60.0 * max_minutes
    inside = [p for p in curve if p["wall_s"] <= cap]
    return inside[-1]["test_mean"] if inside else None


def at_thresholds(run: dict, thresholds: list[float]) -> list[dict]:
    """Per threshold: where the run reached it (None figures: it did not)."""
    out = []
    for x in thresholds:
        hit = reach(run["curve"], x, run.get("max_minutes"))
        out.append(
            {
                "threshold": x,
                "wall_s": None if hit is None else hit["wall_s"],
                "env_steps": None if hit is None else hit["env_steps"],
                "point": None if hit is None else hit["label"],
            }
        )
    return out


def curve_of(run: dict, points: int, episodes: int, cache: Cache, log) -> Curve:
    if run["method"].startswith("sb3-"):
        return sb3_curve(run, points, episodes, cache, log)
    make = evolve_curve if run["method"] == "evolve" else ppo_curve
    return make(Path(run["out"]), points, episodes, cache, log)


def score(run: dict, points: int, episodes: int, thresholds: dict, cache: Cache, log=print) -> Curve:
    """Test the run's checkpointed policies (as ``bench compare`` does) and add the
    threshold figures to ``run``: ``reached`` (per threshold of its task: wall time, env
    steps and point where it passed it), and those of the first threshold as
    ``threshold``, ``steps_to_threshold``, ``wall_to_threshold_s`` (the run's own clock at
    the first tested point past it; None: never, or not within ``--max-minutes``),
    ``point_at_threshold``; ``final_test`` (mean) and ``final_test_std`` of its last
    tested point, ``score_within_cap`` (the last within ``--max-minutes``), ``wall_s``
    and ``env_steps`` in all."""
    curve = tested_curve(run, points, episodes, cache, log)
    run["curve"] = [
        {"env_steps": p.env_steps, "wall_s": p.wall, "label": p.label, "test_mean": p.test_mean} for p in curve.points
    ]
    reached = at_thresholds(run, list(thresholds.get(run["task"], [THRESHOLDS.get(run["task"], math.inf)])))
    first = reached[0]
    run.update(
        reached=reached,
        threshold=first["threshold"],
        label=curve.method,
        steps_to_threshold=first["env_steps"],
        wall_to_threshold_s=first["wall_s"],
        point_at_threshold=first["point"],
        finished=curve.finished,
    )
    last = curve.points[-1] if curve.points else None
    run.update(
        final_test=math.nan if last is None else last.test_mean,
        final_test_std=math.nan if last is None else last.test_std,
        score_within_cap=within_cap(run["curve"], run.get("max_minutes")),
        wall_s=None if last is None else last.wall,
        env_steps=None if last is None else last.env_steps,
    )
    return curve


def tested_curve(run: dict, points: int, episodes: int, cache: Cache, log) -> Curve:
    """The run's tested curve; a run stopped at ``--max-minutes`` before it kept a policy
    (its file not even written) has none."""
    try:
        curve = curve_of(run, points, episodes, cache, log)
    except (UsageError, OSError) as exc:
        if not run.get("stopped_at_cap"):
            raise
        log(f"  {run['out']}: no policy kept within the cap ({exc})")
        curve = Curve(run["out"], run["method"], run["task"], run["method"], run["seed"])
    curve.finished = curve.finished and bool(curve.points)
    return curve


def given_thresholds(items: list[str]) -> dict[str, list[float]]:
    """The ``--threshold ENV=X[,Y...]`` items, per task (repeats add to its list)."""
    given: dict[str, list[float]] = {}
    for item in items:
        env, xs = threshold_item(item, several=True)
        mine = given.setdefault(env, [])
        mine += [x for x in xs if x not in mine]
    return given


def parse_thresholds(items: list[str]) -> dict[str, list[float]]:
    """Each task's thresholds: ``bench compare``'s defaults, replaced for a task by the
    ``--threshold`` items naming it."""
    return {**{k: [v] for k, v in THRESHOLDS.items()}, **given_thresholds(items)}
