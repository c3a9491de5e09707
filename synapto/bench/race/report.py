"""The race's Markdown: the runs, evolution's ratio to each rival per task, and the
projection's (also ``--project-only``'s): per task and threshold, the table of projected
wall times (methods against cores), the crossing points, and the model's inputs from
every run with its error against each measurement."""

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


def _s(x) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min"


def _m(x) -> str:
    return "-" if x is None else f"{x / 1e6:.3f} M" if x < 1e7 else f"{x / 1e6:.1f} M"


def _test(run: dict) -> str:
    if not math.isfinite(run["final_test"]):
        return "no policy kept"
    return f"{run['final_test']:.1f} ± {run['final_test_std']:.1f}"


def _thresholds(run: dict) -> str:
    return ", ".join(f"{x['threshold']:g}" for x in run["reached"])


def _missed(run: dict) -> str:
    cap = run.get("max_minutes")
    if cap is None:
        return "not reached"
    score = run.get("score_within_cap")
    return f"not reached within {cap:g} minutes" + ("" if score is None else f" (score {score:.1f})")


def _per_threshold(run: dict, cell) -> str:
    """One cell per threshold, joined (prefixed by the threshold where there are several)."""
    many = len(run["reached"]) > 1
    parts = [(f"{x['threshold']:g}: " if many else "") + cell(x) for x in run["reached"]]
    return "; ".join(parts)


def runs_table(runs: list[dict]) -> str:
    return md_table(
        [
            *["task (threshold)", "method", "seed", "cores (processes)", "other load before (cores)"],
            *["wall to threshold", "env steps to it", "final test", "wall, env steps in all", "with start-up", "CPU s"],
        ],
        [
            [
                f"{r['task']} ({_thresholds(r)})",
                r["label"],
                r["seed"],
                f"{r['cores']} ({r['processes']})",
                f"{r['load_before']['busy_cores']:.2f}",
                _per_threshold(r, lambda x, r=r: _missed(r) if x["wall_s"] is None else _s(x["wall_s"])),
                _per_threshold(r, lambda x: _m(x["env_steps"])),
                _test(r) + (f" (stopped at {r['max_minutes']:g} min)" if r.get("stopped_at_cap") else ""),
                f"{_s(r['wall_s'])}, {_m(r['env_steps'])}",
                _s(r["process_wall_s"]),
                f"{r['cpu_s']:.0f}",
            ]
            for r in runs
        ],
        align="llrrrrrrrrr",
    )


def ratios(runs: list[dict]) -> list[str]:
    """Per task, rival and seed: evolution's wall time to the (first) threshold over the rival's."""
    lines = []
    for task in dict.fromkeys(r["task"] for r in runs):
        mine = [r for r in runs if r["task"] == task]
        for rival in dict.fromkeys(r["method"] for r in mine if r["method"] != "evolve"):
            parts = []
            for seed in dict.fromkeys(r["seed"] for r in mine):
                pair = {r["method"]: r for r in mine if r["seed"] == seed}
                e, p = (pair.get(m, {}).get("wall_to_threshold_s") for m in ("evolve", rival))
                parts.append(
                    f"seed {seed}: "
                    + (
                        f"{e / p:.2f}"
                        if e is not None and p
                        else f"evolution {'reached' if e is not None else 'did not reach'}, "
                        f"{name(rival)} {'reached' if p is not None else 'did not reach'}"
                    )
                )
            lines.append(f"- {task}: evolution's wall time to threshold / {name(rival)}'s: " + "; ".join(parts))
    return lines


SB3_SOURCE = {"tqc": "sb3-contrib's TQC (on Stable-Baselines3)", "sac": "Stable-Baselines3's SAC"}


def _setting(result: dict) -> list[str]:
    lines = []
    if result.get("shared_coordinator"):
        lines += [
            f"Shared coordinator: every method had {result['cores']} cores; evolution ran "
            f"{result['workers']} workers and its coordinator on them, PPO at most {result['cores']} processes.",
            "",
        ]
    if result.get("sb3"):
        lines += [
            f"SB3 {result['sb3'].upper()} is {SB3_SOURCE[result['sb3']]} with rl-baselines3-zoo's settings "
            f"for the task, one process with {result['cores']} torch threads; its kept actors were tested on "
            "PPO's test stream (synapto/bench/race/sb3.py).",
            "",
        ]
    if result.get("max_minutes") is not None:
        lines += [
            f"Each run was capped at {result['max_minutes']:g} minutes (--max-minutes): a threshold counts only "
            "where a tested point within them passed it; the score is that of its last tested point within them.",
            "",
        ]
    return lines


def markdown(result: dict) -> str:
    load = result["load"]
    lines = [
        "# bench race: evolution against its rivals on the same cores",
        "",
        "```",
        result["command"],
        "```",
        "",
        f"Machine: {load['cores']} cores ({load['usable_cores']} usable). Other load before the race: "
        f"{load['busy_cores']:.2f} busy cores over {load['interval_s']:g} s (/proc/stat), load average "
        f"{load['loadavg_1min']:.2f}"
        + (
            " — **the race ran under other load** (--allow-load): its wall times are indicative only."
            if result["loaded"]
            else "."
        ),
        "",
        *_setting(result),
        "Wall times are the runs' own clocks at the first tested point past the threshold (an upper bound: "
        'the crossing lies between it and the point before); "with start-up" is the whole command. '
        f"Tests: {result['episodes']} episodes of each run's test stream at up to {result['points']} "
        "checkpointed policies per run.",
        "",
        runs_table(result["runs"]),
        "",
        *ratios(result["runs"]),
        "",
        "## Projection (not a measurement)",
        "",
        PROJECTION_INTRO,
        "",
        *projection_lines(result["projection"]),
    ]
    return "\n".join(lines) + "\n"
