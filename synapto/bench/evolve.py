"""The evolution benchmark: ``python -m synapto bench evolve`` (``make bench-evolve``).

For every seed, and every worker count of ``workers`` (and, with ``waves``, the
reference's blocking waves beside the default dynamic scheduling at every count
above 1), one ``python -m synapto evolve ... --workers N`` runs through the real
command line under ``mpiexec`` (``N = 0``: in one process).  Everything reported is
computed from those runs' files (``/timing``, ``/steps``, ...) and from the time
stamps of their per-generation log lines:

* wall time per seed (the process, start-up included) and the evolution loop's
  time (header line to last generation line), mean ± std over seeds (population
  std); env steps/s and steps/s per worker over the loop time; speed-up and
  parallel efficiency against the smallest worker count, paired by seed (every
  worker count computes bit-identical runs, which the benchmark checks);
* the raw-environment ceiling, measured right after the runs of each worker count
  by ``N`` concurrent processes with no synapto in the loop: the same env made by
  the same ``make_env``, the same episode seeds, and as the "fixed cheap policy"
  the actions the run's agents took on those seeds, replayed from a table (so the
  episodes are the very same trajectories).  One fresh env per episode like
  synapto (make + reset + steps + close), and also one env reused (reset only) to
  show what re-making costs.  The ceiling for a run is
  ``steps / (episodes * per_episode + steps * per_step)`` with the per-episode and
  per-step costs measured there and the run's own episode and step counts; the
  ratio is synapto's steps/s per worker over it.  The same processes also run
  synapto's ``evaluate`` on the same evaluations, interleaved with the raw replay:
  the worker-side ratio (no MPI, no coordinator);
* where the worker-seconds go (workers x generation time): env, agent, other work
  inside a task, serialisation and communication, idle (load imbalance),
  validation episodes, the coordinator's update, its other work, and writing the
  run file and checkpoint;
* the serial fraction of Amdahl's law fitted to the speed-ups, and projections at
  24, 40 and 64 ranks, from Amdahl and from a simulation of the task farm on the
  measured per-individual costs.

Results go to ``<out_dir>/evolve_<agent>.md``, ``.json`` and (with matplotlib)
``.png``; run files and logs to ``<out_dir>/runs/``.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import pickle
import platform
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Callable, Optional

import numpy as np
import typer

from synapto.bench.common import (amdahl, cpu_count, fit_amdahl, fmt_mean_std, load_average, md_table, mean_std,
                                   shares, speedups)
from synapto.errors import UsageError
from synapto.store import differences

#: options taking several values (synapto's main() expands them)
MULTI_VALUE_OPTIONS = ("--hidden", "--seed", "--workers-list")

PROJECT_RANKS = (24, 40, 64)
REFERENCE_MODE = ("--no-crn", "--validate-episodes", "0", "--mutation-std", "0")

#: parts of the worker-seconds, in report order: (key, label)
PARTS = (
    ("env", "env (make, reset, step, close)"),
    ("agent", "agent (forward, traces)"),
    ("task", "other work in a task"),
    ("comm", "serialisation + communication"),
    ("idle", "idle (load imbalance)"),
    ("validation", "validation episodes"),
    ("update", "coordinator update"),
    ("coordinator", "coordinator other"),
    ("write", "run file + checkpoint"),
)

_MPI_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SYNAPTO_LAUNCHED",
             "MPI_LOCALNRANKS", "MPI_LOCALRANKID", "HYDRA_CONTROL_FD")
_GEN_LINE = re.compile(r"^gen\s+(\d+)/(\d+)\s")


@dataclass
class Settings:
    env: str = "BipedalWalker-v3"
    agent: str = "hebbian-dag"
    hidden: tuple = (8, 8)
    population: int = 64
    generations: int = 5
    episodes: int = 2
    seeds: tuple = (13, 41337)
    workers: tuple = (1, 2)
    waves: bool = True
    raw_steps: int = 20000  #: env steps replayed per raw-ceiling process (0: no ceiling)
    out_dir: str = "bench"
    #: extra `synapto evolve` options for every run; by default the reference's algorithm
    #: (pure synaptolysis, as experiments/bipedal_hebbian_dag.toml runs the origin benchmark)
    evolve_options: tuple = REFERENCE_MODE

    def check(self) -> None:
        if self.population < 2:
            raise UsageError(f"--population must be >= 2, got {self.population}")
        if self.generations < 1 or self.episodes < 1:
            raise UsageError("--generations and --episodes must be >= 1")
        if not self.seeds:
            raise UsageError("--seed needs at least one value")
        if len(set(self.seeds)) != len(self.seeds):
            raise UsageError(f"--seed has repeated values {list(self.seeds)}")
        if not self.workers or any(n < 0 for n in self.workers):
            raise UsageError(f"--workers-list needs worker counts >= 0, got {list(self.workers)}")
        if len(set(self.workers)) != len(self.workers):
            raise UsageError(f"--workers-list has repeated values {list(self.workers)}")
        if self.raw_steps < 0:
            raise UsageError(f"--raw-steps must be >= 0, got {self.raw_steps}")

    @property
    def tag(self) -> str:
        return "".join(c if c.isalnum() or c in "-_" else "_" for c in self.agent.split(":")[-1])


# --------------------------------------------------------------------------- running evolve
def evolve_command(s: Settings, workers: int, schedule: str, seed: int, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "synapto", "evolve", "--env", s.env, "--agent", s.agent,
           "--hidden", *map(str, s.hidden), "--population", str(s.population),
           "--generations", str(s.generations), "--episodes", str(s.episodes), "--seed", str(seed),
           "--test-episodes", "0", "--schedule", schedule, "--out", str(out), "--force"]
    if workers > 0:
        cmd += ["--workers", str(workers)]
    return cmd + list(s.evolve_options)


def _child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _MPI_VARS}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Logged:
    wall: float  #: the process's wall time
    lines: list  #: (seconds since start, line) of its output


def run_logged(cmd: list[str], log_path: Path) -> Logged:
    """Run ``cmd``, time-stamping every output line on arrival; the log keeps both."""
    t0 = time.perf_counter()
    lines = []
    with open(log_path, "w", buffering=1) as log:  # line-buffered: the log can be followed
        log.write("$ " + shlex.join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=_child_env(), bufsize=1)
        try:
            for line in proc.stdout:
                t = time.perf_counter() - t0
                lines.append((t, line.rstrip("\n")))
                log.write(f"[{t:9.3f}] {line}")
            rc = proc.wait()
        except BaseException:  # interrupted: mpiexec passes SIGTERM on; evolve stops cleanly
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    wall = time.perf_counter() - t0
    if rc != 0:
        tail = "\n".join(line for _, line in lines[-15:])
        raise UsageError(f"benchmark run failed (exit {rc}): {shlex.join(cmd)}\n{tail}")
    return Logged(wall, lines)


def loop_times(lines) -> tuple[float | None, list[float]]:
    """``(start, [end of generation 1, 2, ...])`` from time-stamped evolve output:
    the header line (printed just before the first generation) and each
    generation's line (printed after its rows and checkpoint are written)."""
    start, ends = None, []
    for t, line in lines:
        if line.startswith("synapto evolve:"):
            start, ends = t, []
        elif start is not None and _GEN_LINE.match(line):
            ends.append(t)
    return start, ends


# --------------------------------------------------------------------------- reading runs
def read_run(path: Path) -> dict:
    """What the benchmark needs from a finished run file."""
    from synapto.store import RunData

    with RunData(path, kind="evolve") as run:
        timing = {k: np.asarray(v, dtype=float) for k, v in run.timing_columns().items()}
        out = {"config": run.config, "generations": run.completed, "timing": timing,
               "steps": np.asarray(run.steps(), dtype=np.int64), "episodes_per_individual": run.episodes}
        if run.has_validation:
            out["validation_steps"] = np.asarray(run.validation_steps(), dtype=np.int64)
            out["validation_episodes"] = run.validation_episodes
    return out


def run_work(run: dict) -> tuple[int, int]:
    """``(env steps, episodes)`` of a run's generations, validation episodes included."""
    steps = int(run["steps"].sum())
    episodes = int(run["steps"].size) * run["episodes_per_individual"]
    if "validation_steps" in run:
        steps += int(run["validation_steps"].sum())
        episodes += int(run["validation_steps"].size) * run["validation_episodes"]
    return steps, episodes


def breakdown(timing: dict, n_workers: int, cycles=None) -> dict[str, float]:
    """Worker-seconds of a run by part (seconds, summed over generations).

    Per generation, with ``n`` workers (a one-process run counts as one) and
    ``cycle`` the generation's full time (from the log; ``wall`` without it): the
    total is ``n * cycle``; ``env``, ``agent`` and ``task`` (the rest of
    ``worker_compute``) are worker time inside tasks; ``idle`` is worker time
    holding no task; ``comm`` is the rest of ``n * eval_wall`` (sending,
    serialising, receiving, polling latency); the coordinator's parts are
    ``n`` times its own time outside the evaluation map, since every worker waits
    for it then.  The parts sum to ``n * sum(cycle)`` by construction.
    """
    n = max(n_workers, 1)
    G = len(timing["wall"])
    z = np.zeros(G)
    get = lambda k: np.nan_to_num(np.asarray(timing.get(k, z), dtype=float))  # noqa: E731
    wall, ev, comp = get("wall"), get("eval_wall"), get("worker_compute")
    env, agent, idle = get("worker_env"), get("worker_agent"), get("worker_idle")
    val, upd, write = get("validation"), get("update"), get("write")
    cyc = wall if cycles is None else np.asarray(cycles, dtype=float)
    parts = {
        "env": env, "agent": agent, "task": comp - env - agent,
        "comm": n * ev - comp - idle, "idle": idle, "validation": n * val, "update": n * upd,
        "coordinator": n * (wall - ev - val - upd - write), "write": n * (write + cyc - wall),
    }
    return {k: float(np.sum(v)) for k, v in parts.items()}


def productive_share(parts: dict, timing: dict, n_workers: int) -> float:
    """Share of the worker-seconds spent evaluating (env, agent, the rest of a task).

    Validation maps are timed only as a whole; their evaluating share is taken to
    be that of the training maps (``worker_compute / (n * eval_wall)``).
    """
    total = sum(parts.values())
    inside = parts["env"] + parts["agent"] + parts["task"]
    map_time = max(n_workers, 1) * float(np.sum(np.nan_to_num(timing["eval_wall"])))
    if parts["validation"] and map_time:
        inside += parts["validation"] * float(np.sum(timing["worker_compute"])) / map_time
    return inside / total if total else math.nan


# --------------------------------------------------------------------------- raw-env ceiling
def build_sample(run_path: Path, budget: int, seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """Evaluations drawn from a run (seeded) until ``budget`` env steps, with the
    actions their agents took, recorded by re-running them here (not timed).  Each
    re-run must give the stored episode returns bit for bit."""
    from synapto.agents import build_agent
    from synapto.config import EvolveConfig
    from synapto.envs import make_env
    from synapto.store import RunData

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
        items = [(g, i, np.asarray(run.population(g, i)), np.asarray(run.seeds(g, i)),
                  np.asarray(run.returns(g, i))) for g, i in picks]
    evaluations, mismatches = [], 0
    for g, i, genome, seeds, returns in items:
        policy = agent.policy(genome)
        episodes = []
        for e, s in enumerate(seeds):
            env = make_env(cfg["env"])
            obs, _ = env.reset(seed=int(s))
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
            mismatches += total_r != returns[e]
            episodes.append((int(s), actions))
        evaluations.append({"generation": g, "individual": i, "genome": genome, "seeds": seeds,
                            "episodes": episodes})
    if mismatches:
        log(f"warning: {mismatches} re-run episode(s) of {run_path} differ from the stored returns")
    return {"env": cfg["env"], "agent": cfg["agent"], "hidden": tuple(cfg["hidden"]),
            "agent_options": cfg.get("agent_options", {}), "evaluations": evaluations,
            "steps": int(sum(len(a) for ev in evaluations for _, a in ev["episodes"])),
            "episodes": int(sum(len(ev["episodes"]) for ev in evaluations)), "mismatches": int(mismatches)}


def raw_process(sample_path: str, out_path: str) -> None:
    """One raw-ceiling process: replay the sample's evaluations three ways,
    interleaved (rotating order) so that a change of machine load hits all three:
    fresh env per episode, one reused env, and synapto's ``evaluate``."""
    from synapto.envs import make_env
    from synapto.evolution.evaluate import EvalTask, EvolveSpec

    with open(sample_path, "rb") as fh:
        sample = pickle.load(fh)
    env_id = sample["env"]
    evaluator = EvolveSpec(env_id, sample["agent"], tuple(sample["hidden"]), dict(sample["agent_options"])).build()
    clock, cpu = time.perf_counter, time.thread_time
    acc = {m: dict(make=0.0, reset=0.0, step=0.0, close=0.0, wall=0.0, cpu=0.0, steps=0, episodes=0)
           for m in ("fresh", "reuse", "synapto")}
    reuse_env = make_env(env_id)

    def fresh(ev):
        a = acc["fresh"]
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

    def reuse(ev):
        a = acc["reuse"]
        for seed, actions in ev["episodes"]:
            t1 = clock()
            reuse_env.reset(seed=seed)
            t2 = clock()
            step, n = reuse_env.step, 0
            for act in actions:  # state leaks across reset: the episode may end elsewhere
                n += 1
                _, _, terminated, truncated, _ = step(act)
                if terminated or truncated:
                    break
            a["reset"] += t2 - t1
            a["step"] += clock() - t2
            a["steps"] += n
            a["episodes"] += 1

    def syn(ev):
        r = evaluator(EvalTask(ev["genome"], ev["seeds"]))
        acc["synapto"]["steps"] += int(r.steps.sum())
        acc["synapto"]["episodes"] += len(r.steps)

    modes = (("fresh", fresh), ("reuse", reuse), ("synapto", syn))
    fresh(sample["evaluations"][0])  # warm-up (first-call costs), not counted
    for a in acc.values():
        a.update(make=0.0, reset=0.0, step=0.0, close=0.0, steps=0, episodes=0)
    for k, ev in enumerate(sample["evaluations"]):
        for j in range(3):
            name, fn = modes[(k + j) % 3]
            w, c = clock(), cpu()
            fn(ev)
            acc[name]["cpu"] += cpu() - c
            acc[name]["wall"] += clock() - w
    reuse_env.close()
    n, best = 20_000, math.inf  # one clock read, loop included; best of 5 against load
    for _ in range(5):
        t = clock()
        for _ in range(n):
            clock()
        best = min(best, (clock() - t) / n)
    acc["clock_s"] = best
    with open(out_path, "w") as fh:
        json.dump(acc, fh)


def measure_raw(sample_path: Path, concurrency: int, tag: str) -> dict:
    """``concurrency`` raw processes at once; their figures summed (they did the same work)."""
    outs = [sample_path.with_name(f"{sample_path.stem}_{tag}_{k}.json") for k in range(concurrency)]
    procs = [subprocess.Popen([sys.executable, "-m", "synapto.bench.evolve", "raw", str(sample_path), str(o)],
                              env=_child_env()) for o in outs]
    rcs = [p.wait() for p in procs]
    if any(rcs):
        raise UsageError(f"raw-environment measurement failed (exit codes {rcs})")
    results = [json.loads(o.read_text()) for o in outs]
    total = {m: {k: float(sum(r[m][k] for r in results)) for k in results[0][m]}
             for m in ("fresh", "reuse", "synapto")}
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


# --------------------------------------------------------------------------- projection
def simulate_farm(task_times, n_workers: int, schedule: str = "dynamic", per_task: float = 0.0) -> float:
    """Makespan of one ``map``: tasks in index order, each to the first free worker
    (dynamic) or in blocking waves of ``n_workers`` (waves)."""
    if n_workers <= 0 or len(task_times) == 0:
        return float(sum(task_times)) + per_task * len(task_times)
    if schedule == "waves":
        return float(sum(max(task_times[i:i + n_workers]) + per_task
                         for i in range(0, len(task_times), n_workers)))
    free = [0.0] * min(n_workers, len(task_times))
    for t in task_times:
        heapq.heappush(free, heapq.heappop(free) + t + per_task)
    return float(max(free))


def project(run: dict, raw: dict, cycles, per_task_comm: float, worker_counts) -> dict:
    """Predicted loop time per worker count, from a run's measured per-generation
    coordinator time and per-individual work.  A task's time is
    ``k * (episodes * per_episode + steps * per_step)`` with the raw costs and
    ``k`` scaled so that the tasks add up to the run's measured compute."""
    t = run["timing"]
    f = raw["fresh"]
    c_ep = (f["make"] + f["reset"] + f["close"]) / max(f["episodes"], 1)
    c_step = f["step"] / max(f["steps"], 1)
    E = run["episodes_per_individual"]
    train = E * c_ep + run["steps"] * c_step  # (G, P) modelled seconds
    val = None
    if "validation_steps" in run and run["validation_steps"].size:
        val = run["validation_episodes"] * c_ep + run["validation_steps"] * c_step
    # /timing/worker_compute covers the training map only: scale the model to it
    k = float(np.sum(t["worker_compute"])) / float(train.sum()) if train.sum() else 1.0
    wall = np.asarray(t["wall"])
    cyc = wall if cycles is None else np.asarray(cycles)
    serial = cyc - np.asarray(t["eval_wall"]) - np.nan_to_num(np.asarray(t.get("validation", 0 * wall)))
    out = {}
    for n in worker_counts:
        for sched in ("dynamic", "waves"):
            total = float(serial.sum())
            for g in range(len(wall)):
                total += simulate_farm(k * train[g], n, sched, per_task_comm)
                if val is not None:
                    total += simulate_farm(k * val[g], n, sched, per_task_comm)
            out[f"{n}/{sched}"] = total
    return out


# --------------------------------------------------------------------------- the benchmark
def summarise_run(run: dict, workers: int, logged: Logged | None) -> dict:
    steps, episodes = run_work(run)
    start, ends = loop_times(logged.lines) if logged is not None else (None, [])
    cycles = None
    if start is not None and len(ends) == run["generations"]:
        cycles = np.diff([start, *ends])
        loop = float(ends[-1] - start)
    else:
        loop = float(np.sum(run["timing"]["wall"]))
    n = max(workers, 1)
    parts = breakdown(run["timing"], workers, cycles)
    tasks = int(run["steps"].size + (run["validation_steps"].size if "validation_steps" in run else 0))
    return {
        "productive_share": productive_share(parts, run["timing"], workers),
        "process_wall": logged.wall if logged is not None else math.nan,
        "loop": loop, "generations": run["generations"], "env_steps": steps, "episodes": episodes,
        "steps_per_s": steps / loop, "steps_per_s_per_worker": steps / loop / n,
        "parts": parts, "shares": shares(parts), "cycles": None if cycles is None else [float(c) for c in cycles],
        "comm_per_task": parts["comm"] / tasks if tasks else 0.0, "tasks": tasks,
        "config": run["config"],
    }


def run_bench(s: Settings, log: Callable[[str], None] = print) -> dict:
    s.check()
    out_dir = Path(s.out_dir)
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    workers = sorted(s.workers)
    scheds = lambda n: ["dynamic"] + (["waves"] if s.waves and n > 1 else [])  # noqa: E731
    result = {
        "settings": {**asdict(s), "hidden": list(s.hidden), "seeds": list(s.seeds), "workers": workers,
                     "evolve_options": list(s.evolve_options)},
        "machine": {"machine": platform.machine(), "cores": cpu_count(), "python": platform.python_version(),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S")},
        "runs": [], "raw": [], "identical": {}, "commands": [],
    }
    t_start = time.perf_counter()
    for seed in s.seeds:
        first: Path | None = None
        sample_path = runs_dir / f"raw_sample_{s.tag}_s{seed}.pkl"
        for n in workers:
            for sched in scheds(n):
                out = runs_dir / f"evolve_{s.tag}_w{n}_{sched}_s{seed}.h5"
                cmd = evolve_command(s, n, sched, seed, out)
                load0 = load_average()
                log(f"seed {seed}, {n} worker(s), {sched}: {shlex.join(cmd[1:])}")
                logged = run_logged(cmd, out.with_suffix(".log"))
                summary = summarise_run(read_run(out), n, logged)
                summary.update(workers=n, schedule=sched, seed=seed, load=[load0, load_average()], out=str(out))
                result["runs"].append(summary)
                if not result["commands"]:
                    result["commands"].append(shlex.join(["python", *cmd[1:]]))
                log(f"  {summary['process_wall']:.1f} s ({summary['loop']:.1f} s loop), "
                    f"{summary['env_steps']:,} env steps, {summary['steps_per_s_per_worker']:,.0f} steps/s per worker")
                if first is None:
                    first = out
                    if s.raw_steps:
                        sample = build_sample(out, s.raw_steps, log=log)
                        with open(sample_path, "wb") as fh:
                            pickle.dump(sample, fh)
                        log(f"  raw sample: {len(sample['evaluations'])} evaluations, {sample['steps']:,} steps")
                else:
                    diff = differences(first, out)
                    result["identical"][f"s{seed} w{n} {sched}"] = not diff
                    if diff:
                        log(f"  warning: results differ from {first.name}: {', '.join(diff[:5])}")
            if s.raw_steps:
                raw = measure_raw(sample_path, max(n, 1), f"p{max(n, 1)}")
                raw_entry = {"seed": seed, "workers": n, **raw, "summary": raw_summary(raw)}
                result["raw"].append(raw_entry)
                rs = raw_entry["summary"]
                log(f"  raw env, {max(n, 1)} process(es): {rs['fresh_steps_per_s']:,.0f} steps/s fresh env "
                    f"(synapto evaluate side by side: {rs['synapto_steps_per_s']:,.0f}, ratio "
                    f"{rs['worker_ratio_wall']:.3f} wall, {rs['worker_ratio_cpu']:.3f} cpu)")
    result["bench_seconds"] = time.perf_counter() - t_start
    derive(result)
    md = markdown(result)
    base = out_dir / f"evolve_{s.tag}"
    base.with_suffix(".md").write_text(md)
    base.with_suffix(".json").write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    written = [str(base.with_suffix(".md")), str(base.with_suffix(".json"))]
    if plot(result, base.with_suffix(".png")):
        written.append(str(base.with_suffix(".png")))
    log("")
    log(md)
    log("written: " + ", ".join(written))
    return result


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def derive(result: dict) -> None:
    """Table rows, ratios, breakdown shares and projections from the raw records."""
    runs, raws = result["runs"], result["raw"]
    raw_of = {(r["seed"], r["workers"]): r for r in raws}
    for r in runs:
        raw = raw_of.get((r["seed"], r["workers"]))
        if raw is not None:
            r["ceiling"] = ceiling(raw, r["env_steps"], r["episodes"])
            r["ceiling_reuse"] = ceiling(raw, r["env_steps"], r["episodes"], "reuse")
            r["ratio"] = r["steps_per_s_per_worker"] / r["ceiling"]
            # load-robust estimate: both factors are ratios measured side by side
            r["ratio_side_by_side"] = raw["summary"]["worker_ratio_wall"] * r["productive_share"]
    keys = sorted({(r["workers"], r["schedule"]) for r in runs}, key=lambda k: (k[0], k[1] != "dynamic"))
    dyn_loops = {}
    for r in runs:
        if r["schedule"] == "dynamic":
            dyn_loops.setdefault(r["workers"], {})[r["seed"]] = r["loop"]
    sp_dyn = speedups(dyn_loops)
    rows = []
    for n, sched in keys:
        rs = [r for r in runs if r["workers"] == n and r["schedule"] == sched]
        loops = {r["seed"]: r["loop"] for r in rs}
        sp = speedups({**{b: v for b, v in dyn_loops.items() if b == min(dyn_loops)}, n: loops}) \
            if sched != "dynamic" else sp_dyn
        parts = {k: sum(r["parts"][k] for r in rs) for k, _ in PARTS}
        rows.append({
            "workers": n, "schedule": sched, "seeds": [r["seed"] for r in rs],
            "process_wall": [r["process_wall"] for r in rs], "loop": [r["loop"] for r in rs],
            "steps_per_s": float(np.mean([r["steps_per_s"] for r in rs])),
            "steps_per_s_per_worker": float(np.mean([r["steps_per_s_per_worker"] for r in rs])),
            "speedup": sp.get(n, {}).get("speedup", math.nan),
            "efficiency": sp.get(n, {}).get("efficiency", math.nan),
            "ceiling": float(np.mean([r["ceiling"] for r in rs])) if all("ceiling" in r for r in rs) else math.nan,
            "ceiling_reuse": float(np.mean([r["ceiling_reuse"] for r in rs])) if all("ceiling" in r for r in rs)
            else math.nan,
            "ratio": float(np.mean([r["ratio"] for r in rs])) if all("ratio" in r for r in rs) else math.nan,
            "ratio_side_by_side": float(np.mean([r["ratio_side_by_side"] for r in rs]))
            if all("ratio" in r for r in rs) else math.nan,
            "productive_share": float(np.mean([r["productive_share"] for r in rs])),
            "parts": parts, "shares": shares(parts),
        })
    result["rows"] = rows
    points = {row["workers"]: row["speedup"] for row in rows if row["schedule"] == "dynamic"}
    base = min(points) if points else 1
    f = fit_amdahl(points) if base <= 1 else math.nan
    proj = {"amdahl_serial_fraction": f,
            "amdahl": {R: amdahl(f, R - 1) if math.isfinite(f) else math.nan for R in PROJECT_RANKS}}
    # the task-farm simulation, from the baseline runs (one per seed)
    sims = []
    for seed in result["settings"]["seeds"]:
        b = next((r for r in runs if r["seed"] == seed and r["workers"] == base and r["schedule"] == "dynamic"), None)
        raw = raw_of.get((seed, base))
        if b is None or raw is None:
            continue
        comm = [r["comm_per_task"] for r in runs if r["seed"] == seed and r["workers"] > 0]
        counts = sorted({max(n, 1) for n, _ in keys} | {R - 1 for R in PROJECT_RANKS})
        sim = project(read_run(Path(b["out"])), raw, b["cycles"], float(np.mean(comm)) if comm else 0.0, counts)
        sims.append({"seed": seed, "loop": sim, "base": max(base, 1)})
    if sims:
        one = {seed_sim["seed"]: seed_sim["loop"][f"{seed_sim['base']}/dynamic"] for seed_sim in sims}
        sim_sp = {}
        for key in sims[0]["loop"]:
            n = int(key.split("/")[0])
            sim_sp[key] = float(np.mean([one[x["seed"]] / x["loop"][key] for x in sims])) * sims[0]["base"]
        proj["simulated_speedup"] = sim_sp
    result["projection"] = proj


def _f(x, fmt="{:.1f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def markdown(result: dict) -> str:
    s, m = result["settings"], result["machine"]
    rows, runs = result["rows"], result["runs"]
    cfg = runs[0]["config"] if runs else {}
    base = min(r["workers"] for r in rows) if rows else 1
    lines = [
        f"## Evolution benchmark: {s['env']}, {s['agent']} {s['hidden']}, population {s['population']}, "
        f"{s['generations']} generations, {s['episodes']} episodes, seeds {' '.join(map(str, s['seeds']))}",
        "",
        f"Machine: {m['machine']}, {m['cores']} cores, Python {m['python']}, {m['date']}; "
        f"load average {_f(min(x for r in runs for x in r['load']))}–{_f(max(x for r in runs for x in r['load']))} "
        f"during the runs; the benchmark took {result['bench_seconds']:.0f} s.",
        "",
        f"Each run: `{result['commands'][0] if result['commands'] else ''}` with `--workers N` (absent for 0) "
        f"and `--schedule`.  Run config: `{json.dumps(cfg, sort_keys=True)}`.",
        "",
        "Wall = the whole process (MPI start-up included); loop = first to last generation (what the steps/s, "
        f"speed-up and efficiency use).  Speed-up against {max(base, 1)} worker(s) "
        f"({'a one-process run counts as one worker' if base == 0 else 'paired by seed'}); "
        "std over seeds is the population std.  Raw ceiling = steps/s of one bare-env process at the same "
        "number of concurrent processes, measured after the runs, for the run's own episodes and steps; ratio "
        "to raw = steps/s per worker / raw ceiling.  Ratio, side by side = (bare env / synapto `evaluate` on "
        "the same episodes, interleaved in one process) x (share of the run's worker-seconds spent evaluating): "
        "the same quantity from two ratios each measured side by side, so a change of machine load between the "
        "run and the ceiling does not move it.",
        "",
    ]
    seeds = s["seeds"]
    table = []
    for row in rows:
        table.append([row["workers"], row["schedule"], " / ".join(f"{w:.1f}" for w in row["process_wall"]),
                      fmt_mean_std(row["process_wall"]), fmt_mean_std(row["loop"]),
                      f"{row['steps_per_s']:,.0f}", f"{row['steps_per_s_per_worker']:,.0f}",
                      _f(row["speedup"], "{:.2f}"), _f(row["efficiency"], "{:.1%}"),
                      _f(row["ceiling"], "{:,.0f}"), _f(row["ratio"], "{:.3f}"),
                      _f(row["ratio_side_by_side"], "{:.3f}")])
    lines.append(md_table(["workers", "schedule", f"wall per seed {'/'.join(map(str, seeds))} (s)",
                           "wall mean ± std (s)", "loop mean ± std (s)", "env steps/s", "steps/s per worker",
                           "speed-up", "efficiency", "raw ceiling (steps/s)", "ratio to raw",
                           "ratio, side by side"], table))
    ident = result["identical"]
    if ident:
        ok = all(ident.values())
        lines += ["", "Results identical across worker counts and schedules (every dataset outside /timing, "
                  f"bit for bit): **{'yes' if ok else 'NO: ' + ', '.join(k for k, v in ident.items() if not v)}**."]
    if result["raw"]:
        lines += ["", "### Raw-environment ceiling", "",
                  "Same env (`make_env`), same episode seeds, the run's own actions replayed from a table (the same "
                  "trajectories), no synapto.  Per seed and number of concurrent processes; the side-by-side "
                  "columns run synapto's `evaluate` on the same evaluations in the same processes, interleaved.", ""]
        t = []
        for r in result["raw"]:
            rs = r["summary"]
            run = next((x for x in runs if x["seed"] == r["seed"] and x["workers"] == r["workers"]
                        and x["schedule"] == "dynamic"), None)
            t.append([r["seed"], r["workers"], rs["processes"], f"{rs['sample_episodes']} / {rs['sample_steps']:,}",
                      f"{rs['make_ms']:.2f} + {rs['reset_ms']:.2f} + {rs['close_ms']:.2f}", f"{rs['step_us']:.0f}",
                      _f(run.get("ceiling") if run else None, "{:,.0f}"),
                      _f(run.get("ceiling_reuse") if run else None, "{:,.0f}"),
                      _f(run.get("ratio") if run else None, "{:.3f}"),
                      f"{rs['fresh_steps_per_s']:,.0f} / {rs['synapto_steps_per_s']:,.0f}",
                      f"{rs['worker_ratio_wall']:.3f} / {rs['worker_ratio_cpu']:.3f}"])
        lines.append(md_table(["seed", "after the runs at (workers)", "processes", "sample episodes / steps",
                               "make + reset + close (ms/episode)",
                               "step (µs)", "ceiling, fresh env (steps/s)", "ceiling, reused env (steps/s)",
                               "run ratio", "side by side: raw / evaluate (steps/s)",
                               "evaluate / raw (wall / cpu)"], t))
        mean_len = [r["env_steps"] / r["episodes"] for r in runs if r["episodes"]]
        lines += ["", f"Mean episode length in the runs: {np.mean(mean_len):.0f} steps.  Targets: ratio ≥ 0.90 "
                  "(hebbian-dag), ≥ 0.95 (pruned-mlp)."]
    lines += ["", "### Where the time goes", "",
              "Shares of worker-seconds (workers × generation time, generation time from the log lines), summed "
              "over generations and seeds.  env, agent and other work in a task are inside tasks (`/timing/"
              "worker_env`, `worker_agent`, the rest of `worker_compute`); idle = holding no task (coordinator "
              "clock); serialisation + communication = the rest of the evaluation time; the coordinator parts are "
              "its own time outside the evaluation, when every worker waits.", ""]
    t = []
    for row in rows:
        sh = row["shares"]
        t.append([row["workers"], row["schedule"], *(_f(sh[k], "{:.1%}") for k, _ in PARTS),
                  f"{sum(row['parts'].values()):.0f}"])
    lines.append(md_table(["workers", "schedule", *(label for _, label in PARTS), "worker-seconds"], t))
    if result["raw"]:
        clock_ns = np.mean([r["summary"]["clock_ns"] for r in result["raw"]])
        step_us = np.mean([r["summary"]["step_us"] for r in result["raw"]])
        lines += ["", f"Measuring costs two clock reads per step ({clock_ns:.0f} ns each) against a {step_us:.0f} µs "
                  f"env step: {2 * clock_ns / (10 * step_us):.2f} % (per-episode and per-task clock reads are "
                  "negligible)."]
    waves = [row for row in rows if row["schedule"] == "waves"]
    if waves:
        lines += ["", "### Waves against dynamic scheduling", ""]
        for w in waves:
            d = next(row for row in rows if row["workers"] == w["workers"] and row["schedule"] == "dynamic")
            lines.append(f"- {w['workers']} workers: waves {fmt_mean_std(w['loop'])} s against dynamic "
                         f"{fmt_mean_std(d['loop'])} s loop time ({np.mean(w['loop']) / np.mean(d['loop']) - 1:+.1%}); "
                         f"idle {w['shares']['idle']:.1%} against {d['shares']['idle']:.1%} of worker-seconds; "
                         f"efficiency {_f(w['efficiency'], '{:.1%}')} against {_f(d['efficiency'], '{:.1%}')}.")
    proj = result.get("projection", {})
    f = proj.get("amdahl_serial_fraction", math.nan)
    lines += ["", "### Beyond one machine", ""]
    pts = ", ".join(f"{row['workers']}: {row['speedup']:.2f}" for row in rows if row["schedule"] == "dynamic")
    if math.isfinite(f):
        lines.append(f"Amdahl's law fitted to the measured speed-ups ({pts}): serial fraction f = {f:.4f}; "
                     "projected speed-up " + ", ".join(f"{amdahl(f, R - 1):.1f} at {R} ranks ({R - 1} workers)"
                                                      for R in PROJECT_RANKS) + ".")
    else:
        lines.append("Amdahl fit: needs a run at 1 worker (or 0) and one above it.")
    base_row = next((row for row in rows if row["schedule"] == "dynamic" and row["workers"] == base), None)
    if base_row is not None:
        sh = base_row["shares"]
        f_meas = sh["update"] + sh["coordinator"] + sh["write"]
        lines.append("")
        lines.append(f"The serial work itself (coordinator update, its other work, run file and checkpoint) is "
                     f"{f_meas:.2%} of the worker-seconds at {max(base, 1)} worker(s); as Amdahl's f it gives "
                     + ", ".join(f"{amdahl(f_meas, R - 1):.1f} at {R} ranks ({R - 1} workers)" for R in PROJECT_RANKS)
                     + ".  A fitted f well above it measures the machine (cores shared by the workers, the "
                     "coordinator and other processes), not synapto's serial part.")
    sim = proj.get("simulated_speedup")
    if sim:
        measured = {row["workers"]: row["speedup"] for row in rows if row["schedule"] == "dynamic"}
        check = ", ".join(f"{n} workers: simulated {sim[f'{max(n, 1)}/dynamic']:.2f}, measured {measured[n]:.2f}"
                          for n in sorted(measured) if n > 1 and f"{n}/dynamic" in sim)
        lines.append("")
        lines.append("Task-farm simulation (each generation's individuals with their measured env steps, the raw "
                     "per-episode and per-step costs scaled to the measured compute, the measured communication "
                     "per task and coordinator time per generation): " + ", ".join(
                         f"{sim[f'{R - 1}/dynamic']:.1f} at {R} ranks (waves {sim[f'{R - 1}/waves']:.1f})"
                         for R in PROJECT_RANKS) + (f"; check against this machine: {check}." if check else "."))
    lines += ["", "Assumptions: one core per rank, rank 0 coordinating (it polls and sleeps, so it needs little "
              "CPU) and ranks 1.. evaluating; per-step cost as measured here (no slow-down from shared memory "
              "bandwidth, turbo or hyper-threads); the serial part (coordinator update, run-file writes) does not "
              "grow with ranks; the same configuration, so with "
              f"{s['population']} individuals per generation workers beyond the population idle and the slowest "
              "individual bounds a generation (the simulation accounts for that, Amdahl does not).  A fit to 1 and "
              "2 workers on a 2-core machine shared with other processes is a rough estimate.", ""]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return False
    rows = result["rows"]
    ticks = sorted({max(r["workers"], 1) for r in rows})
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for sched, style in (("dynamic", "o-"), ("waves", "s--")):
        rs = [r for r in rows if r["schedule"] == sched]
        if not rs:
            continue
        n = [max(r["workers"], 1) for r in rs]
        a1.errorbar(n, [mean_std(r["loop"])[0] for r in rs], yerr=[mean_std(r["loop"])[1] for r in rs],
                    fmt=style, capsize=3, label=sched)
        a2.plot(n, [r["efficiency"] for r in rs], style, label=sched)
    f = result.get("projection", {}).get("amdahl_serial_fraction", math.nan)
    if math.isfinite(f):
        xs = np.arange(1, max(ticks) + 1)
        a2.plot(xs, [amdahl(f, x) / x for x in xs], ":", color="grey", label=f"Amdahl f={f:.3f}")
    for a in (a1, a2):
        a.set_xticks(ticks)
    a1.set_xlabel("workers")
    a1.set_ylabel("evolution loop time (s)")
    a2.set_xlabel("workers")
    a2.set_ylabel("parallel efficiency")
    a2.set_ylim(0, 1.1)
    for a in (a1, a2):
        a.legend()
        a.grid(alpha=0.3)
    s = result["settings"]
    fig.suptitle(f"{s['env']} {s['agent']} {s['hidden']}, population {s['population']}, "
                 f"{s['generations']} generations")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- command line
def register(bench_app) -> None:
    """Add ``evolve`` to the ``bench`` typer sub-app."""
    d = Settings()

    @bench_app.command("evolve")
    def bench_evolve(
        env: Annotated[str, typer.Option(help="Gymnasium environment id.")] = d.env,
        agent: Annotated[str, typer.Option(help="pruned-mlp, hebbian-dag or package.module:Class.")] = d.agent,
        hidden: Annotated[Optional[list[int]], typer.Option(
            help="Hidden layer sizes (default 8 8).")] = None,
        population: Annotated[int, typer.Option(help="Individuals per generation.")] = d.population,
        generations: Annotated[int, typer.Option(help="Generations per run.")] = d.generations,
        episodes: Annotated[int, typer.Option(help="Episodes per fitness.")] = d.episodes,
        seed: Annotated[Optional[list[int]], typer.Option(
            help="Run seeds, one run per seed and worker count (default 13 41337).")] = None,
        workers_list: Annotated[Optional[list[int]], typer.Option(
            help="Worker counts; 0 runs in one process without MPI (default 1 2).")] = None,
        waves: Annotated[bool, typer.Option(
            help="Also run --schedule waves at every worker count above 1.")] = d.waves,
        raw_steps: Annotated[int, typer.Option(
            help="Env steps replayed per raw-ceiling process (0 skips the raw-environment ceiling).")] = d.raw_steps,
        out_dir: Annotated[Path, typer.Option(help="Where the table (.md, .json, .png) and runs/ go.")]
            = Path(d.out_dir),
        evolve_options: Annotated[str, typer.Option(
            help="Extra `synapto evolve` options for every run; the default runs the reference's algorithm, "
                 "as the origin benchmark did; \"\" runs evolve's defaults.")] = shlex.join(REFERENCE_MODE),
    ):
        """Time evolution at several worker counts: table, raw-env ratio, time breakdown, projection."""
        settings = Settings(env=env, agent=agent, hidden=tuple(hidden or d.hidden), population=population,
                            generations=generations, episodes=episodes, seeds=tuple(seed or d.seeds),
                            workers=tuple(d.workers if workers_list is None else workers_list), waves=waves,
                            raw_steps=raw_steps, out_dir=str(out_dir),
                            evolve_options=tuple(shlex.split(evolve_options)))
        run_bench(settings, log=lambda msg: print(msg, flush=True))


if __name__ == "__main__":  # python -m synapto.bench.evolve raw SAMPLE.pkl OUT.json
    if len(sys.argv) == 4 and sys.argv[1] == "raw":
        raw_process(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python -m synapto.bench.evolve raw SAMPLE.pkl OUT.json")
