"""The origin's PPO benchmark, scaled to the machine: ``make bench-ppo``.

The origin ran Spinning Up's PPO on BipedalWalker with ``--hid "[32,32]" --gamma 0.999
--epochs 1000 --steps_per_epoch 40000 --seed 13 42 1337 --cpu 40`` and reported the
wall time per seed, mean +- std, per process count.  This runs the same command
through ``python -m synapto ppo --cpu P`` for every P in ``procs`` and every seed,
one after another, and reports:

* wall time per seed: the run's own clock (its last ``Time``, like Spinning Up's
  column: from the start of training, including setup, excluding interpreter and MPI
  start-up), and mean +- std over seeds (population std);
* env steps per second, seconds per epoch, the final training return;
* where an epoch's time goes on rank 0 (env stepping, policy forward passes in the
  rollout, batched value pass, GAE, the update and its policy and value loops, MPI
  collectives).

Results go to ``<out_dir>/ppo.md`` and ``<out_dir>/ppo.json``; run files and logs
to ``<out_dir>/runs/``.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import typer

from synapto.bench.common import cpu_count, load_average, run_logged
from synapto.common.declare import Request, command, multi_value_flags, opt
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir

SPLIT = (
    ("env", "env stepping"),
    ("act", "policy fwd (rollout)"),
    ("values", "value fwd (batched)"),
    ("gae", "GAE + normalise"),
    ("update", "update"),
)
#: the update's two loops, timed on their own (they overlap in single-process runs)
LOOPS = (("update_pi", "policy loop"), ("update_v", "value loop"))

ORIGIN = (
    "origin (Spinning Up, 3960x, 1000 epochs x 40000 steps): 1448 +- 29 s at 40 processes, "
    "1505 +- 17 s at 20, 2737 +- 23 s at 10; 2315 +- 31 s on an n1-highcpu-64"
)


def summarise(run_path: Path) -> dict:
    from synapto.store import PPORun

    with PPORun(run_path) as run:
        n = run.completed
        timing = {
            name: run.timing(name) for name in ("Time", "epoch", "comm", "setup", "cpu", *(k for k, _ in SPLIT + LOOPS))
        }
        steps = int(run.stats("TotalEnvInteracts")[-1])
        ret = run.stats("AverageEpRet")
        stop = run.stats("StopIter")
    wall = float(timing["Time"][-1])
    split = {k: float(np.mean(timing[k])) for k, _ in SPLIT + LOOPS}
    split["comm"] = float(np.mean(timing["comm"]))
    split["epoch"] = float(np.mean(timing["epoch"]))
    split["other"] = split["epoch"] - sum(split[k] for k, _ in SPLIT)
    return {
        "wall": wall,
        "epochs": n,
        "env_steps": steps,
        "steps_per_s": steps / wall,
        "epoch_s": float(np.mean(timing["epoch"])),
        "epoch_cpu_s": float(np.mean(timing["cpu"])),
        "setup_s": float(timing["setup"][0]),
        "final_return": float(ret[-1]),
        "last10_return": float(np.nanmean(ret[-10:])),
        "mean_stop_iter": float(np.mean(stop)),
        "split": split,
    }


def markdown(result: dict) -> str:
    s = result["settings"]
    seeds = s["seeds"]
    lines = [
        f"## PPO benchmark: {s['env']}, hid {' '.join(map(str, s['hid']))}, gamma {s['gamma']}, "
        f"max_ep_len {s['max_ep_len']}, {s['epochs']} epochs x {s['steps']} steps, seeds {' '.join(map(str, seeds))}",
        "",
        f"Machine: {s['machine']}; load average {s['load_before']:.1f} before, {s['load_after']:.1f} after "
        f"(a load above the core count means other work shared the cores).  Wall time per seed = the run's "
        f"own clock (setup + epochs); std over seeds is the population std.  CPU s / epoch is rank 0's "
        f"process CPU time: close to the wall time on a quiet machine.",
        "",
        "| processes | "
        + " | ".join(f"seed {x} (s)" for x in seeds)
        + " | mean ± std (s) | s / epoch | CPU s / epoch | env steps/s | policy stop iter "
        "| final return (mean of seeds) |",
        "|---:|" + "---:|" * len(seeds) + "---:|---:|---:|---:|---:|---:|",
    ]
    for p, runs in result["runs"].items():
        walls = [runs[str(x)]["wall"] for x in seeds]
        lines.append(
            f"| {p} | "
            + " | ".join(f"{w:.1f}" for w in walls)
            + f" | {np.mean(walls):.1f} ± {np.std(walls):.1f}"
            + f" | {np.mean([runs[str(x)]['epoch_s'] for x in seeds]):.3f}"
            + f" | {np.mean([runs[str(x)]['epoch_cpu_s'] for x in seeds]):.3f}"
            + f" | {np.mean([runs[str(x)]['steps_per_s'] for x in seeds]):.0f}"
            + f" | {np.mean([runs[str(x)]['mean_stop_iter'] for x in seeds]):.1f}"
            + f" | {np.mean([runs[str(x)]['final_return'] for x in seeds]):.1f} |"
        )
    lines += [
        "",
        ORIGIN + ".",
        "",
        'Mean time per epoch on rank 0, seconds (mean over seeds and epochs).  "of which MPI" is the '
        "time inside collectives (transfers and waiting for slower ranks), already counted in the GAE "
        "(advantage normalisation waits for every rank's rollout), update and other columns.  The "
        "update's policy and value loops are timed on their own too; a single process runs them on "
        "two threads at once (bit-identical results), so there the update takes about the longer of "
        "the two:",
        "",
        "| processes | " + " | ".join(label for _, label in SPLIT + LOOPS) + " | of which MPI | other | epoch |",
        "|---:|" + "---:|" * (len(SPLIT) + len(LOOPS) + 3),
    ]
    for p, runs in result["runs"].items():
        split = {k: np.mean([runs[str(x)]["split"][k] for x in seeds]) for k in runs[str(seeds[0])]["split"]}
        lines.append(
            f"| {p} | "
            + " | ".join(f"{split[k]:.3f}" for k, _ in SPLIT + LOOPS)
            + f" | {split['comm']:.3f} | {split['other']:.3f} | {split['epoch']:.3f} |"
        )
    lines.append("")
    if s["load_before"] > s["cores"] or s["load_after"] > s["cores"]:
        lines += [
            "The machine was shared during this run: the wall-clock figures above include time "
            "the processes waited for a core, and MPI collectives include waits for a descheduled "
            "rank.",
            "",
        ]
    return "\n".join(lines)


def run_bench(
    epochs: int,
    steps: int,
    procs: list[int],
    seeds: list[int],
    env: str,
    hid: tuple[int, ...],
    gamma: float,
    max_ep_len: int,
    out_dir: Path,
    log: Callable[[str], None] = print,
) -> dict:
    from synapto.ppo.config import safe_name

    out_dir = Path(out_dir)
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)

    result: dict[str, Any] = {
        "settings": {
            "env": env,
            "hid": list(hid),
            "gamma": gamma,
            "max_ep_len": max_ep_len,
            "epochs": epochs,
            "steps": steps,
            "procs": procs,
            "seeds": seeds,
            "machine": f"{platform.machine()}, {cpu_count()} cores, Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cores": cpu_count(),
            "load_before": load_average(),
        },
        "runs": {},
    }
    for p in procs:
        result["runs"][str(p)] = {}
        for seed in seeds:
            run_path = runs_dir / f"ppo_{safe_name(env)}_p{p}_s{seed}.h5"
            cmd = ppo_command(result["settings"], p, seed, run_path)
            process_s = run_logged(cmd, run_path.with_suffix(".log")).wall
            summary = summarise(run_path)
            summary["process_s"] = process_s
            result["runs"][str(p)][str(seed)] = summary
            log(
                f"procs {p} seed {seed}: {summary['wall']:.1f} s ({summary['epoch_s']:.3f} s/epoch, "
                f"{summary['steps_per_s']:.0f} env steps/s, final return {summary['final_return']:.1f})"
            )
    result["settings"]["load_after"] = load_average()
    md = markdown(result)
    (out_dir / "ppo.md").write_text(md)
    (out_dir / "ppo.json").write_text(json.dumps(result, indent=2) + "\n")
    log("")
    log(md)
    log(f"written: {out_dir / 'ppo.md'}, {out_dir / 'ppo.json'}")
    return result


def ppo_command(settings: dict, p: int, seed: int, run_path: Path) -> list[str]:
    """The ``synapto ppo`` command of the run of ``seed`` at ``p`` processes."""
    s = settings
    words = ["--env", s["env"], "--hid", *map(str, s["hid"])]
    for flag, value in (
        *(("--gamma", s["gamma"]), ("--epochs", s["epochs"]), ("--steps-per-epoch", s["steps"])),
        *(("--seed", seed), ("--cpu", p), ("--max-ep-len", s["max_ep_len"]), ("--out", run_path)),
    ):
        words += [flag, str(value)]
    return [sys.executable, "-m", "synapto", "ppo", *words, "--force"]


# ----------------------------------------------------------------------------- command
@dataclass(frozen=True)
class BenchPPOOptions:
    """``synapto bench ppo``'s options."""

    epochs: int = opt(100, help="Epochs per run.")
    steps: int = opt(4000, help="Env steps per epoch (global).")
    procs: list[int] | None = opt(None, help="Process counts to run.", show_default="1 2", multi=True)
    seed: list[int] | None = opt(None, help="Seeds, run one after another.", show_default="13 42 1337")
    env: str = opt("BipedalWalker-v3", help="Environment.")
    hid: list[str] | None = opt(None, help="Hidden sizes.", show_default="32 32")
    gamma: float = opt(0.999, help="Discount factor.")
    max_ep_len: int = opt(
        1000,
        flags=("--max-ep-len", "--max_ep_len"),
        help="Episode cap (1000 = Spinning Up's default, as in the origin run).",
    )
    out_dir: Path = opt(Path("bench"), help="Where the table (Markdown, JSON) and run files go.")


#: options taking several space-separated values (see synapto.cli.MULTI_VALUE_OPTIONS)
MULTI_VALUE_OPTIONS = multi_value_flags(BenchPPOOptions)


def bench_ppo(request: Request) -> None:
    """The origin's Spinning Up PPO benchmark, scaled: wall time per seed at each process count."""
    from synapto.ppo.config import parse_hid

    o = request.build(BenchPPOOptions)
    procs = o.procs or [1, 2]
    if any(p < 1 for p in procs):
        raise UsageError(f"--procs must be integers >= 1, got {procs}")
    if o.epochs < 1 or o.steps < 1:
        raise UsageError(f"--epochs and --steps must be >= 1, got {o.epochs} and {o.steps}")
    if o.steps < max(procs):
        raise UsageError(f"--steps {o.steps} is smaller than the largest process count {max(procs)}")
    check_out_dir(o.out_dir)
    hid = parse_hid(o.hid) if o.hid else (32, 32)
    run_bench(
        o.epochs,
        o.steps,
        procs,
        o.seed or [13, 42, 1337],
        o.env,
        hid,
        o.gamma,
        o.max_ep_len,
        o.out_dir,
        log=lambda msg: print(msg, flush=True),
    )


def register(bench_app: typer.Typer) -> None:
    """Add ``bench ppo`` to ``bench_app``."""
    bench_app.command("ppo")(command(bench_ppo, BenchPPOOptions))
