"""``bench evolve``: the report (Markdown) and its figure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from synapto.bench.common import amdahl, fmt_mean_std, md_table, mean_std, pyplot
from synapto.bench.evolve.projection import PROJECT_RANKS
from synapto.bench.evolve.runs import PARTS


def _f(x, fmt="{:.1f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def markdown(result: dict) -> str:
    rows = result["rows"]
    base = min(r["workers"] for r in rows) if rows else 1
    lines = [
        *_header(result, base),
        *_runs_table(result),
        *_raw_ceiling(result),
        *_time_shares(result),
        *_waves(rows),
        *_beyond_one_machine(result, base),
        *_assumptions(result["settings"]),
    ]
    return "\n".join(lines)


def _header(result: dict, base: int) -> list[str]:
    """The title, the machine, the command and how to read the table."""
    s, m = result["settings"], result["machine"]
    runs = result["runs"]
    cfg = runs[0]["config"] if runs else {}
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
    return lines


def _runs_table(result: dict) -> list[str]:
    """The runs' table, and whether their results are identical."""
    s, rows = result["settings"], result["rows"]
    lines: list[str] = []
    seeds = s["seeds"]
    table = []
    for row in rows:
        table.append(
            [
                row["workers"],
                row["schedule"],
                " / ".join(f"{w:.1f}" for w in row["process_wall"]),
                fmt_mean_std(row["process_wall"]),
                fmt_mean_std(row["loop"]),
                f"{row['steps_per_s']:,.0f}",
                f"{row['steps_per_s_per_worker']:,.0f}",
                _f(row["speedup"], "{:.2f}"),
                _f(row["efficiency"], "{:.1%}"),
                _f(row["ceiling"], "{:,.0f}"),
                _f(row["ratio"], "{:.3f}"),
                _f(row["ratio_side_by_side"], "{:.3f}"),
            ]
        )
    lines.append(
        md_table(
            [
                *["workers", "schedule", f"wall per seed {'/'.join(map(str, seeds))} (s)", "wall mean ± std (s)"],
                *["loop mean ± std (s)", "env steps/s", "steps/s per worker", "speed-up", "efficiency"],
                *["raw ceiling (steps/s)", "ratio to raw", "ratio, side by side"],
            ],
            table,
        )
    )
    ident = result["identical"]
    if ident:
        ok = all(ident.values())
        lines += [
            "",
            "Results identical across worker counts and schedules (every dataset outside /timing, "
            f"bit for bit): **{'yes' if ok else 'NO: ' + ', '.join(k for k, v in ident.items() if not v)}**.",
        ]
    return lines


def _raw_ceiling(result: dict) -> list[str]:
    """The raw-environment ceiling's section (none without a ceiling)."""
    runs = result["runs"]
    if not result["raw"]:
        return []
    lines = [
        "",
        "### Raw-environment ceiling",
        "",
        "Same env (`make_env`), same episode seeds, the run's own actions replayed from a table (the same "
        "trajectories), no synapto.  Per seed and number of concurrent processes; the side-by-side "
        "columns run synapto's `evaluate` on the same evaluations in the same processes, interleaved.",
        "",
    ]
    header = ["seed", "after the runs at (workers)", "processes", "sample episodes / steps"]
    header += ["make + reset + close (ms/episode)", "step (µs)", "ceiling, fresh env (steps/s)"]
    header += ["ceiling, reused env (steps/s)", "run ratio", "side by side: raw / evaluate (steps/s)"]
    header += ["evaluate / raw (wall / cpu)"]
    lines.append(md_table(header, [_raw_row(r, runs) for r in result["raw"]]))
    mean_len = [r["env_steps"] / r["episodes"] for r in runs if r["episodes"]]
    lines += [
        "",
        f"Mean episode length in the runs: {np.mean(mean_len):.0f} steps.  Targets: ratio ≥ 0.90 "
        "(hebbian-dag), ≥ 0.95 (pruned-mlp).",
    ]
    return lines


def _raw_row(r: dict, runs: list[dict]) -> list:
    """The ceiling table's row of raw measurement ``r``, beside its dynamic run's ratio."""
    rs = r["summary"]
    run = next(
        (x for x in runs if x["seed"] == r["seed"] and x["workers"] == r["workers"] and x["schedule"] == "dynamic"),
        None,
    )
    return [
        r["seed"],
        r["workers"],
        rs["processes"],
        f"{rs['sample_episodes']} / {rs['sample_steps']:,}",
        f"{rs['make_ms']:.2f} + {rs['reset_ms']:.2f} + {rs['close_ms']:.2f}",
        f"{rs['step_us']:.0f}",
        _f(run.get("ceiling") if run else None, "{:,.0f}"),
        _f(run.get("ceiling_reuse") if run else None, "{:,.0f}"),
        _f(run.get("ratio") if run else None, "{:.3f}"),
        f"{rs['fresh_steps_per_s']:,.0f} / {rs['synapto_steps_per_s']:,.0f}",
        f"{rs['worker_ratio_wall']:.3f} / {rs['worker_ratio_cpu']:.3f}",
    ]


def _time_shares(result: dict) -> list[str]:
    """Where the worker-seconds went, and what measuring them costs."""
    rows = result["rows"]
    lines: list[str] = []
    lines += [
        "",
        "### Where the time goes",
        "",
        "Shares of worker-seconds (workers × generation time, generation time from the log lines), summed "
        "over generations and seeds.  env, agent and other work in a task are inside tasks (`/timing/"
        "worker_env`, `worker_agent`, the rest of `worker_compute`); idle = holding no task (coordinator "
        "clock); serialisation + communication = the rest of the evaluation time; the coordinator parts are "
        "its own time outside the evaluation, when every worker waits.",
        "",
    ]
    t = []
    for row in rows:
        sh = row["shares"]
        t.append(
            [
                row["workers"],
                row["schedule"],
                *(_f(sh[k], "{:.1%}") for k, _ in PARTS),
                f"{sum(row['parts'].values()):.0f}",
            ]
        )
    lines.append(md_table(["workers", "schedule", *(label for _, label in PARTS), "worker-seconds"], t))
    if result["raw"]:
        clock_ns = np.mean([r["summary"]["clock_ns"] for r in result["raw"]])
        step_us = np.mean([r["summary"]["step_us"] for r in result["raw"]])
        lines += [
            "",
            f"Measuring costs two clock reads per step ({clock_ns:.0f} ns each) against a {step_us:.0f} µs "
            f"env step: {2 * clock_ns / (10 * step_us):.2f} % (per-episode and per-task clock reads are "
            "negligible).",
        ]
    return lines


def _waves(rows: list) -> list[str]:
    """Waves against dynamic scheduling, per worker count run both ways (none without waves)."""
    lines: list[str] = []
    waves = [row for row in rows if row["schedule"] == "waves"]
    if waves:
        lines += ["", "### Waves against dynamic scheduling", ""]
        for w in waves:
            d = next(row for row in rows if row["workers"] == w["workers"] and row["schedule"] == "dynamic")
            lines.append(
                f"- {w['workers']} workers: waves {fmt_mean_std(w['loop'])} s against dynamic "
                f"{fmt_mean_std(d['loop'])} s loop time ({np.mean(w['loop']) / np.mean(d['loop']) - 1:+.1%}); "
                f"idle {w['shares']['idle']:.1%} against {d['shares']['idle']:.1%} of worker-seconds; "
                f"efficiency {_f(w['efficiency'], '{:.1%}')} against {_f(d['efficiency'], '{:.1%}')}."
            )
    return lines


def _beyond_one_machine(result: dict, base: int) -> list[str]:
    """The projection beyond one machine: Amdahl's fit, the measured serial part, the simulation."""
    rows = result["rows"]
    lines: list[str] = []
    proj = result.get("projection", {})
    f = proj.get("amdahl_serial_fraction", math.nan)
    lines += ["", "### Beyond one machine", ""]
    pts = ", ".join(f"{row['workers']}: {row['speedup']:.2f}" for row in rows if row["schedule"] == "dynamic")
    if math.isfinite(f):
        lines.append(
            f"Amdahl's law fitted to the measured speed-ups ({pts}): serial fraction f = {f:.4f}; "
            "projected speed-up "
            + ", ".join(f"{amdahl(f, R - 1):.1f} at {R} ranks ({R - 1} workers)" for R in PROJECT_RANKS)
            + "."
        )
    else:
        lines.append("Amdahl fit: needs a run at 1 worker (or 0) and one above it.")
    base_row = next((row for row in rows if row["schedule"] == "dynamic" and row["workers"] == base), None)
    if base_row is not None:
        sh = base_row["shares"]
        f_meas = sh["update"] + sh["coordinator"] + sh["write"]
        lines.append("")
        lines.append(
            f"The serial work itself (coordinator update, its other work, run file and checkpoint) is "
            f"{f_meas:.2%} of the worker-seconds at {max(base, 1)} worker(s); as Amdahl's f it gives "
            + ", ".join(f"{amdahl(f_meas, R - 1):.1f} at {R} ranks ({R - 1} workers)" for R in PROJECT_RANKS)
            + ".  A fitted f well above it measures the machine (cores shared by the workers, the "
            "coordinator and other processes), not synapto's serial part."
        )
    sim = proj.get("simulated_speedup")
    if sim:
        measured = {row["workers"]: row["speedup"] for row in rows if row["schedule"] == "dynamic"}
        check = ", ".join(
            f"{n} workers: simulated {sim[f'{max(n, 1)}/dynamic']:.2f}, measured {measured[n]:.2f}"
            for n in sorted(measured)
            if n > 1 and f"{n}/dynamic" in sim
        )
        lines.append("")
        lines.append(
            "Task-farm simulation (each generation's individuals with their measured env steps, the raw "
            "per-episode and per-step costs scaled to the measured compute, the measured communication "
            "per task and coordinator time per generation): "
            + ", ".join(
                f"{sim[f'{R - 1}/dynamic']:.1f} at {R} ranks (waves {sim[f'{R - 1}/waves']:.1f})" for R in PROJECT_RANKS
            )
            + (f"; check against this machine: {check}." if check else ".")
        )
    return lines


def _assumptions(s: dict) -> list[str]:
    """What the projection assumes."""
    lines: list[str] = []
    lines += [
        "",
        "Assumptions: one core per rank, rank 0 coordinating (it polls and sleeps, so it needs little "
        "CPU) and ranks 1.. evaluating; per-step cost as measured here (no slow-down from shared memory "
        "bandwidth, turbo or hyper-threads); the serial part (coordinator update, run-file writes) does not "
        "grow with ranks; the same configuration, so with "
        f"{s['population']} individuals per generation workers beyond the population idle and the slowest "
        "individual bounds a generation (the simulation accounts for that, Amdahl does not).  A fit to 1 and "
        "2 workers on a 2-core machine shared with other processes is a rough estimate.",
        "",
    ]
    return lines


def plot(result: dict, path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    rows = result["rows"]
    ticks = sorted({max(r["workers"], 1) for r in rows})
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for sched, style in (("dynamic", "o-"), ("waves", "s--")):
        rs = [r for r in rows if r["schedule"] == sched]
        if not rs:
            continue
        n = [max(r["workers"], 1) for r in rs]
        a1.errorbar(
            n,
            [mean_std(r["loop"])[0] for r in rs],
            yerr=[mean_std(r["loop"])[1] for r in rs],
            fmt=style,
            capsize=3,
            label=sched,
        )
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
    fig.suptitle(f"{s['env']} {s['agent']} {s['hidden']}, population {s['population']}, {s['generations']} generations")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
