"""The projection's Markdown: per task and threshold, the table of projected wall times
(methods against cores), the crossing points, and the model's inputs from every run
with its error against each measurement."""

from __future__ import annotations

import math

from synapto.bench.common import md_table

PROJECTION_INTRO = (
    "Wall time to each threshold predicted from the runs' per-generation and per-epoch timings "
    "(synapto/bench/race/projection.py says what it rests on and what it leaves out); "
    "a Stable-Baselines3 run is held at its measured time at every core count."
)
NAMES = {"ppo": "PPO", "sb3-tqc": "SB3 TQC", "sb3-sac": "SB3 SAC"}


def _t(x) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min" if x < 7200 else f"{x / 3600:.1f} h"


def name(method: str) -> str:
    if method == "evolve":
        return "evolution"
    if method.startswith("evolve-p"):
        return f"evolution, population {method[8:]}"
    if method.startswith("evolve-"):
        return f"evolution, {method.split('-')[1]} per worker"
    return NAMES.get(method, method)


def table(row: dict) -> str:
    cores = row["cores"]
    body = [[name(m), *map(_t, line["seconds"])] for m, line in row["methods"].items()]
    for m, line in row["methods"].items():
        if m.startswith("evolve-") and not m.startswith("evolve-p"):
            body.append([f"population ({name(m)})", *map(str, line["population"])])
    return md_table(["method", *[f"{c} cores" for c in cores]], body)


def crossings(row: dict) -> list[str]:
    out = []
    empty = [m for m, line in row["methods"].items() if all(x is None for x in line["seconds"])]
    for e, rivals in row["crossing"].items():
        for m, c in rivals.items():
            if e in empty or m in empty:
                missing = " and ".join(name(x) for x in (e, m) if x in empty)
                out.append(f"none between {name(e)} and {name(m)}: {missing} never reached it")
                continue
            where = f"from **{c} cores**" if c else "at no projected core count"
            out.append(f"{name(e)} is at least as fast as {name(m)} {where}")
    return out


def _cost(x: dict) -> str:
    """A run's per-generation (per-epoch) costs, as the model took them."""
    if "generations" in x:
        val = x["worker_s_per_validation_task"]
        return (
            f"{x['generations']} generations of population {x['population']}: coordinator "
            f"{x['coordinator_s_per_generation']:.3f} s, {x['tasks_per_generation']:.0f} tasks of "
            f"{x['worker_s_per_task']:.4f} worker-s"
            + (f", validation tasks of {val:.4f} worker-s" if val is not None else "")
        )
    if "epochs" in x:
        return (
            f"{x['epochs']} epochs: rollout {x['rollout_s_per_epoch']:.2f} s on {x['processes']} processes, "
            f"rest {x['serial_s_per_epoch']:.2f} s (serial share {100 * x['serial_share']:.0f} %)"
        )
    return "its measured wall time" if x["reached"] else "-"


def _err(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def inputs_table(row: dict) -> str:
    return md_table(
        ["method", "seed", "cores", "to the threshold, per generation / epoch", "measured", "model", "error"],
        [
            [
                name(x["method"]),
                x["seed"],
                x["cores"],
                _cost(x) if x["reached"] else "not reached",
                _t(x["measured_s"]),
                _t(x["model_s"]),
                _err(x["error"]),
            ]
            for x in row["inputs"]
        ],
        align="lrrlrrr",
    )


def projection_lines(rows: list[dict]) -> list[str]:
    lines = []
    for row in rows:
        head = (
            f"**{row['task']} to {row['threshold']:g}** (median over the seeds that reached it; coordinator "
            f"{1e6 * row['coordinator_s_per_task']:.0f} µs per task"
            + (
                f"; population {row['population_per_worker']} per worker, the largest measured one up to it"
                if row.get("population_per_worker")
                else ""
            )
            + "):"
        )
        cross = crossings(row)
        lines += [
            head,
            "",
            table(row),
            "",
            "Crossing point: " + ("; ".join(cross) if cross else "no rival to cross") + ".",
            "",
            "The model's inputs, and its figure at each run's own cores against the measurement:",
            "",
            inputs_table(row),
            "",
        ]
    return lines
