"""``bench evolve``: from the runs' records to the report's rows (speed-ups, efficiency,
ratios to the raw ceiling, time breakdown) and the projections beyond this machine
(Amdahl's law, a simulation of the task farm on the measured costs)."""

from __future__ import annotations

import heapq
import math
from pathlib import Path

import numpy as np

from synapto.bench.common import amdahl, fit_amdahl, shares, speedups
from synapto.bench.evolve.raw import ceiling
from synapto.bench.evolve.runs import PARTS, read_run

PROJECT_RANKS = (24, 40, 64)


def simulate_farm(task_times, n_workers: int, schedule: str = "dynamic", per_task: float = 0.0) -> float:
    """Makespan of one ``map``: tasks in index order, each to the first free worker
    (dynamic) or in blocking waves of ``n_workers`` (waves)."""
    if n_workers <= 0 or len(task_times) == 0:
        return float(sum(task_times)) + per_task * len(task_times)
    if schedule == "waves":
        return float(sum(max(task_times[i : i + n_workers]) + per_task for i in range(0, len(task_times), n_workers)))
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
    dyn_loops: dict[int, dict[int, float]] = {}  # workers -> seed -> loop seconds
    for r in runs:
        if r["schedule"] == "dynamic":
            dyn_loops.setdefault(r["workers"], {})[r["seed"]] = r["loop"]
    sp_dyn = speedups(dyn_loops)
    rows = []
    for n, sched in keys:
        rs = [r for r in runs if r["workers"] == n and r["schedule"] == sched]
        loops = {r["seed"]: r["loop"] for r in rs}
        sp = (
            speedups({**{b: v for b, v in dyn_loops.items() if b == min(dyn_loops)}, n: loops})
            if sched != "dynamic"
            else sp_dyn
        )
        rows.append(_row(n, sched, rs, sp.get(n, {})))
    result["rows"] = rows
    points = {row["workers"]: row["speedup"] for row in rows if row["schedule"] == "dynamic"}
    base = min(points) if points else 1
    f = fit_amdahl(points) if base <= 1 else math.nan
    proj = {
        "amdahl_serial_fraction": f,
        "amdahl": {R: amdahl(f, R - 1) if math.isfinite(f) else math.nan for R in PROJECT_RANKS},
    }
    sim_sp = _simulated_speedups(result, raw_of, base, keys)
    if sim_sp is not None:
        proj["simulated_speedup"] = sim_sp
    result["projection"] = proj


def _row(n: int, sched: str, rs: list[dict], sp: dict) -> dict:
    """The table row of ``n`` workers and schedule ``sched``: means over its runs ``rs``."""

    def mean(key: str, need: str | None = None) -> float:
        if need is not None and not all(need in r for r in rs):
            return math.nan
        return float(np.mean([r[key] for r in rs]))

    parts = {k: sum(r["parts"][k] for r in rs) for k, _ in PARTS}
    return {
        "workers": n,
        "schedule": sched,
        "seeds": [r["seed"] for r in rs],
        "process_wall": [r["process_wall"] for r in rs],
        "loop": [r["loop"] for r in rs],
        "steps_per_s": mean("steps_per_s"),
        "steps_per_s_per_worker": mean("steps_per_s_per_worker"),
        "speedup": sp.get("speedup", math.nan),
        "efficiency": sp.get("efficiency", math.nan),
        "ceiling": mean("ceiling", "ceiling"),
        "ceiling_reuse": mean("ceiling_reuse", "ceiling"),
        "ratio": mean("ratio", "ratio"),
        "ratio_side_by_side": mean("ratio_side_by_side", "ratio"),
        "productive_share": mean("productive_share"),
        "parts": parts,
        "shares": shares(parts),
    }


def _simulated_speedups(result: dict, raw_of: dict, base: int, keys) -> dict | None:
    """The task-farm simulation's speed-ups, from the baseline runs (one per seed), averaged
    over the seeds; None without a baseline run and its raw-env sample."""
    runs = result["runs"]
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
    if not sims:
        return None
    one = {seed_sim["seed"]: seed_sim["loop"][f"{seed_sim['base']}/dynamic"] for seed_sim in sims}
    sim_sp = {}
    for key in sims[0]["loop"]:
        sim_sp[key] = float(np.mean([one[x["seed"]] / x["loop"][key] for x in sims])) * sims[0]["base"]
    return sim_sp
