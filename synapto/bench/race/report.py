"""The race's Markdown: the runs, the ratio per task, the projection."""

from __future__ import annotations

import math

from synapto.bench.common import md_table


def _s(x) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min"


def _m(x) -> str:
    return "-" if x is None else f"{x / 1e6:.3f} M" if x < 1e7 else f"{x / 1e6:.1f} M"


def runs_table(runs: list[dict]) -> str:
    return md_table(
        [
            "task (threshold)",
            "method",
            "seed",
            "cores (processes)",
            "other load before (cores)",
            "wall to threshold",
            "env steps to it",
            "final test",
            "wall, env steps in all",
            "with start-up",
            "CPU s",
        ],
        [
            [
                f"{r['task']} ({r['threshold']:g})",
                r["label"],
                r["seed"],
                f"{r['cores']} ({r['processes']})",
                f"{r['load_before']['busy_cores']:.2f}",
                _s(r["wall_to_threshold_s"]),
                _m(r["steps_to_threshold"]),
                f"{r['final_test']:.1f} ± {r['final_test_std']:.1f}",
                f"{_s(r['wall_s'])}, {_m(r['env_steps'])}",
                _s(r["process_wall_s"]),
                f"{r['cpu_s']:.0f}",
            ]
            for r in runs
        ],
        align="llrrrrrrrrr",
    )


def ratios(runs: list[dict]) -> list[str]:
    """Per task and seed: evolution's wall to threshold over PPO's."""
    lines = []
    for task in dict.fromkeys(r["task"] for r in runs):
        parts = []
        for seed in dict.fromkeys(r["seed"] for r in runs if r["task"] == task):
            pair = {r["method"]: r for r in runs if r["task"] == task and r["seed"] == seed}
            e, p = (pair.get(m, {}).get("wall_to_threshold_s") for m in ("evolve", "ppo"))
            parts.append(
                f"seed {seed}: "
                + (
                    f"{e / p:.2f}"
                    if e is not None and p
                    else f"evolution {'reached' if e is not None else 'did not reach'}, "
                    f"PPO {'reached' if p is not None else 'did not reach'}"
                )
            )
        lines.append(f"- {task}: evolution's wall time to threshold / PPO's: " + "; ".join(parts))
    return lines


def projection_table(rows: list[dict]) -> list[str]:
    lines = []
    for row in rows:
        cores = row["cores"]
        if not row["evolve"] or not row["ppo"]:
            lines.append(f"- {row['task']}: no projection (a method never reached the threshold).")
            continue
        table = md_table(
            ["method", *[f"{c} cores" for c in cores]],
            [["evolution", *[_s(row["evolve"][c]) for c in cores]], ["PPO", *[_s(row["ppo"][c]) for c in cores]]],
        )
        cross = row["crossing_cores"]
        check = "; ".join(
            f"{m} seed {x['seed']} at {x['cores']} cores: model {_s(x['model'])}, measured {_s(x['measured'])}"
            for m in ("evolve", "ppo")
            for x in row[f"{m}_model_at_measured"]
        )
        lines += [
            f"**{row['task']}** (median over seeds that reached it; PPO's serial share per epoch "
            f"{100 * row['ppo_serial_share']:.0f} %, coordinator {1e6 * row['coordinator_s_per_task']:.0f} µs "
            f"per task):",
            "",
            table,
            "",
            "Crossing point: "
            + (
                f"evolution is at least as fast from **{cross} cores**"
                if cross
                else "evolution is not faster at any projected core count"
            )
            + ".",
            f"The model at the race's own cores, against the measurement: {check}.",
            "",
        ]
    return lines


def markdown(result: dict) -> str:
    load = result["load"]
    lines = [
        "# bench race: evolution against PPO on the same cores",
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
        *(
            [
                f"Shared coordinator: both methods had {result['cores']} cores; evolution ran "
                f"{result['workers']} workers and its coordinator on them, PPO at most {result['cores']} processes.",
                "",
            ]
            if result.get("shared_coordinator")
            else []
        ),
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
        "Wall time to the threshold predicted from this race's per-generation and per-epoch timings "
        "(synapto/bench/race/projection.py says what it rests on and what it leaves out).",
        "",
        *projection_table(result["projection"]),
    ]
    return "\n".join(lines) + "\n"
