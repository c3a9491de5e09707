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

- :mod:`synapto.bench.evolve.runs`        settings; running evolve; what a run's file and log say
- :mod:`synapto.bench.evolve.raw`         the raw-environment ceiling
- :mod:`synapto.bench.evolve.projection`  table rows, Amdahl fit, task-farm simulation
- :mod:`synapto.bench.evolve.report`      the Markdown report and its figure
- this module                             the benchmark itself and its command
"""

from __future__ import annotations

import json
import pickle
import platform
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from synapto.bench.common import cpu_count, load_average, run_logged
from synapto.bench.evolve.projection import derive
from synapto.bench.evolve.raw import build_sample, measure_raw, raw_summary
from synapto.bench.evolve.report import markdown, plot
from synapto.bench.evolve.runs import REFERENCE_MODE, Settings, evolve_command, read_run, summarise_run
from synapto.common.folders import check_out_dir

#: options taking several values (synapto's main() expands them)
MULTI_VALUE_OPTIONS = ("--hidden", "--seed", "--workers-list")


# --------------------------------------------------------------------------- the benchmark
def _new_result(s: Settings, workers: list[int]) -> dict[str, Any]:
    """The benchmark's result before its runs: the settings, the machine, empty records."""
    return {
        "settings": {
            **asdict(s),
            "hidden": list(s.hidden),
            "seeds": list(s.seeds),
            "workers": workers,
            "evolve_options": list(s.evolve_options),
        },
        "machine": {
            "machine": platform.machine(),
            "cores": cpu_count(),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "runs": [],
        "raw": [],
        "identical": {},
        "commands": [],
    }


def run_bench(s: Settings, log: Callable[[str], None] = print) -> dict:
    from synapto.store import differences

    s.check()
    out_dir = Path(s.out_dir)
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    workers = sorted(s.workers)
    scheds = lambda n: ["dynamic"] + (["waves"] if s.waves and n > 1 else [])  # noqa: E731
    result = _new_result(s, workers)
    t_start = time.perf_counter()
    for seed in s.seeds:
        first: Path | None = None
        sample_path = runs_dir / f"raw_sample_{s.tag}_s{seed}.pkl"
        for n in workers:
            for sched in scheds(n):
                out = runs_dir / f"evolve_{s.tag}_w{n}_{sched}_s{seed}.h5"
                _timed_run(s, n, sched, seed, out, result, log)
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
                log(
                    f"  raw env, {max(n, 1)} process(es): {rs['fresh_steps_per_s']:,.0f} steps/s fresh env "
                    f"(synapto evaluate side by side: {rs['synapto_steps_per_s']:,.0f}, ratio "
                    f"{rs['worker_ratio_wall']:.3f} wall, {rs['worker_ratio_cpu']:.3f} cpu)"
                )
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


def _timed_run(s: Settings, n: int, sched: str, seed: int, out: Path, result: dict, log) -> None:
    """One evolve run at ``n`` workers, its summary appended to ``result["runs"]``."""
    cmd = evolve_command(s, n, sched, seed, out)
    load0 = load_average()
    log(f"seed {seed}, {n} worker(s), {sched}: {shlex.join(cmd[1:])}")
    logged = run_logged(cmd, out.with_suffix(".log"))
    summary = summarise_run(read_run(out), n, logged)
    summary.update(workers=n, schedule=sched, seed=seed, load=[load0, load_average()], out=str(out))
    result["runs"].append(summary)
    if not result["commands"]:
        result["commands"].append(shlex.join(["python", *cmd[1:]]))
    log(
        f"  {summary['process_wall']:.1f} s ({summary['loop']:.1f} s loop), "
        f"{summary['env_steps']:,} env steps, {summary['steps_per_s_per_worker']:,.0f} steps/s per worker"
    )


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


# --------------------------------------------------------------------------- command line
def register(bench_app) -> None:
    """Add ``evolve`` to the ``bench`` typer sub-app."""
    d = Settings()

    @bench_app.command("evolve")
    def bench_evolve(
        env: Annotated[str, typer.Option(help="Gymnasium environment id.")] = d.env,
        agent: Annotated[str, typer.Option(help="pruned-mlp, hebbian-dag or package.module:Class.")] = d.agent,
        hidden: Annotated[list[int] | None, typer.Option(help="Hidden layer sizes.", show_default="8 8")] = None,
        population: Annotated[int, typer.Option(help="Individuals per generation.")] = d.population,
        generations: Annotated[int, typer.Option(help="Generations per run.")] = d.generations,
        episodes: Annotated[int, typer.Option(help="Episodes per fitness.")] = d.episodes,
        seed: Annotated[
            list[int] | None,
            typer.Option(help="Run seeds, one run per seed and worker count.", show_default="13 41337"),
        ] = None,
        workers_list: Annotated[
            list[int] | None, typer.Option(help="Worker counts; 0 runs in one process without MPI.", show_default="1 2")
        ] = None,
        waves: Annotated[bool, typer.Option(help="Also run --schedule waves at every worker count above 1.")] = d.waves,
        raw_steps: Annotated[
            int, typer.Option(help="Env steps replayed per raw-ceiling process (0 skips the raw-environment ceiling).")
        ] = d.raw_steps,
        out_dir: Annotated[Path, typer.Option(help="Where the table (.md, .json, .png) and runs/ go.")] = Path(
            d.out_dir
        ),
        evolve_options: Annotated[
            str,
            typer.Option(
                help="Extra `synapto evolve` options for every run; the default runs the reference's algorithm, "
                'as the origin benchmark did; "" runs evolve\'s defaults.'
            ),
        ] = shlex.join(REFERENCE_MODE),
    ):
        """Time evolution at several worker counts: table, raw-env ratio, time breakdown, projection."""
        settings = Settings(
            env=env,
            agent=agent,
            hidden=tuple(hidden or d.hidden),
            population=population,
            generations=generations,
            episodes=episodes,
            seeds=tuple(seed or d.seeds),
            workers=tuple(d.workers if workers_list is None else workers_list),
            waves=waves,
            raw_steps=raw_steps,
            out_dir=str(out_dir),
            evolve_options=tuple(shlex.split(evolve_options)),
        )

        check_out_dir(out_dir)
        run_bench(settings, log=lambda msg: print(msg, flush=True))
