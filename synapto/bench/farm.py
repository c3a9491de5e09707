"""``bench farm``: what the task farm costs, and how far it scales.

Two questions, measured side by side in one run:

1. **The farm alone.**  Zero-cost tasks (the handler returns at once) with payloads of
   100 B to 1 MB, and noise-key tasks (the payload is a sample's index; a centre of the
   shipped BipedalWalker network's size and its keys travel once per worker as the
   map's context), at 1 to 64 worker ranks: tasks/s and the coordinator's CPU per task
   (its process time over the map / tasks).  Each worker count is one ``mpiexec`` job
   (:func:`probe` runs inside it); on a machine with fewer cores than ranks the ranks
   share them (oversubscribed) and tasks/s says more about the cores than the farm.
   From the CPU per noise-key task and the mean BipedalWalker episode of the configs'
   runs below: the worker count at which the coordinator would be busy all the time.
2. **The shipped configs, and the GA at 68 k and 1 M weights.**  ``synapto evolve --config X
   --workers 1`` and ``2`` (and the GA's command lines, :data:`GA_RUNS`) on the same
   env-step budget (``--max-env-steps``; selection and test off), alternating: wall time,
   speed-up, the coordinator's CPU as a share of wall time, and the run file's size per
   generation.

Writes ``farm.md`` and ``farm.json`` to ``--out-dir``.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from synapto.bench.common import cpu_count, load_average, md_table, run_logged
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir
from synapto.common.noise import KEY_WIDTH, Samples

#: payload sizes of the zero-cost tasks (bytes)
SIZES = (100, 10_000, 100_000, 1_000_000)
#: genome length of the noise-key tasks' context (experiments/bipedal_solve.toml's network)
KEY_GENOME = 2720
#: configs, budgets and worker counts of part 2 (config, env steps)
CONFIGS = (("experiments/bipedal_solve.toml", 400_000), ("experiments/lunarlander_learn.toml", 300_000))
#: the GA at deep-neuroevolution scale (genomes as lineages, :mod:`synapto.lineage`):
#: LunarLander with pruned-mlp networks of 68 k and 1.06 M weights (label, options, env steps)
_GA = ["--population", "32", "--episodes", "1", "--generations", "1000", "--seed", "3"]
GA_RUNS = tuple(
    (
        f"ga, pruned-mlp {a}x{a} ({label})",
        ["--env", "LunarLander-v3", "--agent", "pruned-mlp", "--hidden", str(a), str(a), "--strategy", "ga", *_GA],
        budget,
    )
    for a, label, budget in ((256, "68 k weights", 150_000), (1024, "1 M weights", 60_000))
)
_DONE = re.compile(r"done in .*coordinator CPU ([0-9.]+) s")


# -- part 1: inside mpiexec ------------------------------------------------------------
class Echo:
    """The zero-cost handler: returns the payload's length (or the sample's index)."""

    def build(self):
        return self

    def __call__(self, payload, context=None):
        return payload if context is not None else len(payload)


def _keys_context():
    rng = np.random.default_rng(0)
    return Samples(
        "mirrored",
        rng.standard_normal(KEY_GENOME),
        0.05,
        rng.integers(0, 2**63, size=(32, KEY_WIDTH)).astype(np.uint64),
    )


def probe(out: str, tasks_per_worker: int, repeats: int) -> None:
    """Rank 0: time maps of zero-cost tasks of every size in :data:`SIZES` and of noise keys;
    the figures go to ``out`` (JSON).  Other ranks serve."""
    from synapto.parallel.farm import make_farm

    farm, coordinator = make_farm()
    if not coordinator:
        return
    farm.setup(Echo())
    W = farm.n_workers
    rows = []
    cases = [(f"{size:,} B", size) for size in SIZES] + [("noise key", None)]
    for label, size in cases:
        n = max(64, tasks_per_worker * W) if size is None or size < 1_000_000 else max(16, 4 * W)
        context = _keys_context() if size is None else None
        payloads = list(range(n)) if size is None else [np.zeros(size, dtype=np.uint8) for _ in range(n)]
        best = None
        for _ in range(repeats):
            res = farm.map(payloads, context=context)
            s = res.stats
            fig = {
                "payload": label,
                "bytes": size or 0,
                "workers": W,
                "tasks": n,
                "wall": s.wall,
                "tasks_per_s": n / s.wall,
                "cpu_per_task_us": 1e6 * s.coordinator_cpu / n,
            }
            if best is None or fig["cpu_per_task_us"] < best["cpu_per_task_us"]:
                best = fig
        rows.append(best)
    farm.close()
    Path(out).write_text(json.dumps(rows))


def run_probes(workers_list, tasks_per_worker: int, repeats: int, log=print) -> list[dict]:
    """:func:`probe` under ``mpiexec -n W+1`` for each W of ``workers_list``."""
    from synapto.parallel.launch import find_mpiexec

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for W in workers_list:
            out = Path(tmp) / f"probe{W}.json"
            cmd = [find_mpiexec(), "-n", str(W + 1), sys.executable, "-m", "synapto.bench.farm", "probe", str(out)]
            cmd += [str(tasks_per_worker), str(repeats)]
            log(f"farm probe: {W} worker(s) ...")
            run_logged(cmd, Path(tmp) / f"probe{W}.log")
            rows += json.loads(out.read_text())
    return rows


# -- part 2: the shipped configs ---------------------------------------------------------
def run_configs(configs, workers=(1, 2), repeats: int = 1, log=print) -> list[dict]:
    """Each config at each worker count on its env-step budget (counts alternating); a
    config is a path, or ``(label, evolve options)``."""
    from synapto.store import RunData

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for config, budget in configs:
            for r in range(repeats):
                for W in workers if r % 2 == 0 else tuple(reversed(workers)):
                    out = Path(tmp) / f"run{W}.h5"
                    label, options = config if isinstance(config, tuple) else (str(config), ["--config", str(config)])
                    cmd = [sys.executable, "-m", "synapto", "evolve", *options, "--workers", str(W)]
                    cmd += ["--max-env-steps", str(budget), "--select-episodes", "0", "--test-episodes", "0"]
                    cmd += ["--out", str(out), "--force"]
                    log(f"farm config: {label} with {W} worker(s), {budget:,} env steps ...")
                    logged = run_logged(cmd, Path(tmp) / f"run{W}.log")
                    cpu = next((float(m.group(1)) for _, line in logged.lines if (m := _DONE.search(line))), math.nan)
                    with RunData(out) as run:
                        tasks = int(run.fitness().size) + int(run.validation_returns().size)
                        steps = int(run.stats("env_steps")[-1] + run.stats("validation_env_steps")[-1])
                        compute = float(np.nansum(run.timing("worker_compute")))
                        wall = float(np.nansum(run.timing("wall")))
                        per_generation = out.stat().st_size / max(run.completed, 1)
                    rows.append(
                        {
                            "config": label,
                            "budget": budget,
                            "workers": W,
                            "repeat": r,
                            "file_per_generation": per_generation,
                            "wall": logged.wall,
                            "loop_wall": wall,
                            "coordinator_cpu": cpu,
                            "env_steps": steps,
                            "tasks": tasks,
                            "worker_compute": compute,
                        }
                    )
    return rows


def speedup_rows(runs: list[dict]) -> list[dict]:
    """Per config: median wall per worker count, speed-up and efficiency against 1 worker."""
    out = []
    for config in dict.fromkeys(r["config"] for r in runs):
        mine = [r for r in runs if r["config"] == config]
        base = statistics.median(r["loop_wall"] for r in mine if r["workers"] == 1)
        base_process = statistics.median(r["wall"] for r in mine if r["workers"] == 1)
        for W in sorted({r["workers"] for r in mine}):
            rs = [r for r in mine if r["workers"] == W]
            wall = statistics.median(r["loop_wall"] for r in rs)
            process = statistics.median(r["wall"] for r in rs)
            cpu = statistics.median(r["coordinator_cpu"] / r["loop_wall"] for r in rs)
            out.append(
                {
                    "config": config,
                    "workers": W,
                    "wall": wall,
                    "speedup": base / wall,
                    "efficiency": base / wall / W,
                    "coordinator_cpu_share": cpu,
                    "process_wall": process,
                    "process_speedup": base_process / process,
                    "file_per_generation": statistics.median(r.get("file_per_generation", math.nan) for r in rs),
                    "env_steps": rs[0]["env_steps"],
                }
            )
    return out


def saturation(probes: list[dict], runs: list[dict]) -> dict:
    """Workers one coordinator could keep busy on BipedalWalker episodes: the mean
    episode's wall time (a task of the bipedal config at 1 worker: worker compute / tasks)
    over the coordinator's CPU per noise-key task (the most workers measured)."""
    bip = [r for r in runs if "bipedal" in r["config"] and r["workers"] == 1]
    keys = [p for p in probes if p["payload"] == "noise key"]
    if not bip or not keys:
        return {}
    episode = statistics.median(r["worker_compute"] / r["tasks"] for r in bip)
    at = max(keys, key=lambda p: p["workers"])
    return {
        "episode_s": episode,
        "cpu_per_task_us": at["cpu_per_task_us"],
        "measured_at_workers": at["workers"],
        "workers": episode / (1e-6 * at["cpu_per_task_us"]),
    }


def report(probes: list[dict], speed: list[dict], sat: dict) -> str:
    lines = [f"# bench farm ({cpu_count()} cores, load {load_average():.1f} at the end)", ""]
    if probes:
        lines += probe_section(probes)
    if sat:
        lines += [
            f"A BipedalWalker task of the bipedal config takes {1e3 * sat['episode_s']:.0f} ms of a worker "
            f"(median at 1 worker); a noise-key task costs the coordinator {sat['cpu_per_task_us']:.0f} µs "
            f"of CPU (at {sat['measured_at_workers']} workers): one coordinator keeps about "
            f"**{sat['workers']:,.0f} workers** busy before it becomes the bottleneck.",
            "",
        ]
    if speed:
        lines += speed_section(speed)
    return "\n".join(lines)


def probe_section(probes: list[dict]) -> list[str]:
    """The report's lines on the farm alone (zero-cost tasks)."""
    shared = " (ranks beyond the cores share them)" if max(p["workers"] for p in probes) + 1 > cpu_count() else ""
    ws = sorted({p["workers"] for p in probes})
    payloads = list(dict.fromkeys(p["payload"] for p in probes))
    cell = {(p["payload"], p["workers"]): p for p in probes}
    rows = [
        [
            pl,
            *[f"{cell[pl, w]['cpu_per_task_us']:.0f}" for w in ws],
            *[f"{cell[pl, w]['tasks_per_s']:,.0f}" for w in ws],
        ]
        for pl in payloads
    ]
    head = ["payload", *[f"{w} w: µs/task" for w in ws], *[f"{w} w: tasks/s" for w in ws]]
    return [
        "## The farm alone: zero-cost tasks",
        "",
        f"Coordinator CPU per task (µs) and tasks/s, by payload and worker ranks{shared}.",
        "",
        md_table(head, rows),
        "",
    ]


#: the columns of the shipped configs' table
SPEED_COLUMNS = ["config", "env steps", "workers", "wall (s)", "speed-up", "efficiency", "coordinator CPU / wall"]
SPEED_COLUMNS += ["with start-up (s)", "speed-up", "run file / generation"]


def speed_section(speed: list[dict]) -> list[str]:
    """The report's lines on the shipped configs at 1 and 2 workers."""
    rows = [
        [
            r["config"],
            f"{r['env_steps']:,}",
            r["workers"],
            f"{r['wall']:.1f}",
            f"{r['speedup']:.2f}",
            f"{100 * r['efficiency']:.0f} %",
            f"{100 * r['coordinator_cpu_share']:.1f} %",
            f"{r['process_wall']:.1f}",
            f"{r['process_speedup']:.2f}",
            f"{r.get('file_per_generation', math.nan) / 1e6:.2f} MB",
        ]
        for r in speed
    ]
    return [
        "## The shipped configs: 1 and 2 workers",
        "",
        "wall: the run's own wall time (its generations, from /timing/wall); with start-up: the "
        "whole command, mpiexec and every rank's imports included.",
        "",
        md_table(SPEED_COLUMNS, rows),
        "",
    ]


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("farm")
    def bench_farm(
        workers_list: Annotated[
            list[int] | None,
            typer.Option(
                help="Worker ranks of the zero-cost probes (each one mpiexec job).", show_default="1 2 8 32 64"
            ),
        ] = None,
        tasks_per_worker: Annotated[int, typer.Option(help="Zero-cost tasks per worker in a probe map.")] = 50,
        repeats: Annotated[
            int,
            typer.Option(help="Maps per probe (the lowest CPU per task is kept); runs per config and worker count."),
        ] = 3,
        configs: Annotated[bool, typer.Option(help="Also time the shipped configs at 1 and 2 workers.")] = True,
        out_dir: Annotated[Path, typer.Option(help="Where farm.md and farm.json go.")] = Path("bench"),
    ):
        """The task farm's cost per task and the shipped configs' speed-up from 1 to 2 workers."""
        workers_list = list(workers_list or [1, 2, 8, 32, 64])
        if min(workers_list) < 1 or tasks_per_worker < 1 or repeats < 1:
            raise UsageError("--workers-list values, --tasks-per-worker and --repeats must be >= 1")
        check_out_dir(out_dir)
        t0 = time.perf_counter()
        probes = run_probes(workers_list, tasks_per_worker, repeats)
        runs = (
            run_configs(
                [*CONFIGS, *(((label, options), budget) for label, options, budget in GA_RUNS)],
                repeats=max(1, repeats // 2),
            )
            if configs
            else []
        )
        speed = speedup_rows(runs) if runs else []
        sat = saturation(probes, runs)
        md = report(probes, speed, sat)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "farm.json").write_text(
            json.dumps({"probes": probes, "runs": runs, "speedups": speed, "saturation": sat}, indent=2)
        )
        (out_dir / "farm.md").write_text(md + "\n")
        print(md)
        print(f"-> {out_dir / 'farm.md'}, {out_dir / 'farm.json'} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"]:
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
