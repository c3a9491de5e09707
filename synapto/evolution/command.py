"""What ``evolve`` does once its options are read (:func:`evolve_command`): the run's values
(the command line's over a config file's), the checks, the relaunch under MPI, the farm,
the reports of a stopped run, and ``--resume``'s checks against the run it continues.

Bad input raises :class:`synapto.common.errors.UsageError` (one line, exit 2, printed by
:func:`synapto.cli.main`); a stopped run exits with its documented code.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import typer

from synapto import defaults
from synapto.agents import build_agent
from synapto.common.declare import Request
from synapto.common.errors import DiskFullError, TrackingError, UsageError
from synapto.common.estimate import estimate
from synapto.common.logs import say as _log
from synapto.common.options import check_distinct, layer_sizes, out_for_seed
from synapto.common.shell import next_lines, synapto_command
from synapto.evolution.config import TABLES, VALUE_OPTIONS, EvolveConfig, file_values, run_values
from synapto.evolution.loop import RunStopped, run_evolution
from synapto.evolution.progress import Budget, plain_every
from synapto.evolution.restarts import is_own, restarted_jobs
from synapto.evolution.resuming import nothing_to_do, resume_check, resume_state
from synapto.evolution.run_options import EVOLVE_RUN_KEYS, EvolveRun, RunOptions, resolve_population
from synapto.evolution.strategies import make_strategy, strategy_class
from synapto.evolution.worker import fast_box2d
from synapto.parallel.farm import make_farm
from synapto.parallel.launch import env_rank, record_run, start_ranks, under_mpi, world
from synapto.parallel.stopping import StopSignals
from synapto.resources import check_memory, check_run_file, evolve_memory
from synapto.store import check_output_path, check_writable
from synapto.tracking.writers import tracking_callbacks


def check_runs(configs, outs, force: bool = False, resuming: bool = False):
    """Everything checked before runs start, for the command line and the Python API alike
    (one line, exit 2, nothing written): the strategy's options with this agent (pruning
    by trace needs traces; the strategy is built, not started), an envpool backend's
    agent (it needs a batched policy), the population's memory,
    and -- on rank 0, for new runs -- the output paths and the run files' size against
    HDF5's limits and the free disk.  Returns the agent of ``configs[0]``."""
    plain_every()  # a bad $SYNAPTO_PROGRESS_EVERY stops here, before anything starts
    agent = build_agent(configs[0])
    if configs[0].envs.train_backend == "envpool":  # the extra, and a batched policy of this agent
        fast_box2d.require(configs[0], agent)
    check_evolve_memory(configs, agent.n_params)  # before the strategy allocates its arrays
    make_strategy(configs[0], agent, np.random.default_rng(0))
    if env_rank() == 0 and not resuming:
        for cfg, o in zip(configs, outs):
            check_output_path(o, force or is_own(o))  # a restart replaces or continues its own files
            check_run_file(cfg, agent.n_params, o)
    return agent


def check_evolve_memory(configs, n_params: int) -> None:
    """Refuse (exit 2, nothing written) a population that cannot fit this machine's memory."""
    for c in configs:
        own = strategy_class(c.strategy).memory(n_params, c.population, c.strategy_options)
        check_memory(
            evolve_memory(c.population, n_params, c.episodes) + own,
            f"a population of {c.population:,} genomes of {n_params:,} parameters"
            + (f" with {c.strategy}'s arrays" if own else ""),
        )


def next_steps(out) -> str:
    """The commands that look at a finished run, as they run from a fresh shell."""
    stem = Path(out).with_suffix("")
    return next_lines(
        ("learning curves", synapto_command("plot", out, "--out", f"{stem}_curves.png")),
        ("the champion", synapto_command("render", out, "--out", f"{stem}_champion.gif")),
    )


def resume_command(out, workers: int = 0) -> str:
    return synapto_command("evolve", "--resume", out, *(["--workers", workers] if workers else []))


def run_on_farm(jobs, run: EvolveRun, options, callbacks=(), log=_log, signals: bool = True) -> None:
    """Run ``(config, out, resume)`` jobs on this process's farm, as ``run`` asks; report
    stops.  Where every run ends: the command line's (under MPI after
    :func:`synapto.parallel.launch.start_ranks`) and :func:`synapto.evolve`'s with workers
    (its MPI child, :func:`synapto.api._mpi_main`; ``signals=False``: its parent stops it)."""
    farm, coordinator = make_farm(run.task_timeout)
    if not coordinator:
        return
    stop = StopSignals().install() if signals else None
    try:
        for cfg, o, resuming in restarted_jobs(jobs, log):
            replace = run.force or is_own(o)  # a restart starts its own file again when it has no checkpoint
            if not resuming:
                check_output_path(o, replace)
            record_run(o)
            workers = lambda: farm.n_workers if farm.n_workers > 1 or _rank_count() > 1 else 0  # noqa: E731
            try:
                run_evolution(
                    cfg,
                    o,
                    farm,
                    log=log,
                    options=options,
                    resume=resuming,
                    stop=stop,
                    overwrite=replace or resuming,
                    callbacks=callbacks,
                )
                log(next_steps(o))
            except RunStopped as exc:
                farm.close()
                _report_stop(exc, workers(), stop)
            except TrackingError as exc:  # rows and checkpoint of the last generation are on disk
                exc.resume = resume_command(o, workers())
                raise
            except DiskFullError as exc:
                # the run file and checkpoint on disk are the last whole ones: say how to go on
                if (resuming or exc.resumable) and Path(o).exists():
                    n = workers()
                    exc.resume = resume_command(o, n)
                raise
    finally:
        farm.close()


def _rank_count() -> int:
    return world()[2]


def _report_stop(exc, workers: int, stop) -> None:
    resume_cmd = resume_command(exc.out, workers)
    if exc.failure is not None:
        ev, f = exc.failure, exc.failure.failure
        seeds = " ".join(str(int(s)) for s in ev.seeds)
        what = {
            "training": "individual",
            "validation": "validation of individual",
            "selection": "selection of candidate",
            "test": "champion test episode",
        }[ev.phase]
        reproduce = (
            ""
            if ev.phase in ("selection", "test")
            else (
                "reproduce: "
                + synapto_command(
                    "replay",
                    exc.out,
                    "--generation",
                    ev.generation,
                    "--individual",
                    ev.individual,
                    *(["--validation"] if ev.phase == "validation" else []),
                )
                + "\n"
            )
        )
        sys.stderr.write(
            f"error: generation {ev.generation} {what} {ev.individual} failed on rank {f.rank} "
            f"({f.host}), episode seeds [{seeds}]\n{f.traceback}"
            f"the checkpoint of generation {exc.generation} is saved.\n"
            f"{reproduce}"
            f"resume:    {resume_cmd}\n"
        )
        raise typer.Exit(1)
    sys.stderr.write(
        f"stopped after {exc.generation} completed generation(s); checkpoint saved.\nresume with: {resume_cmd}\n"
    )
    raise typer.Exit(1 if stop is None else stop.exit_code)


def resume_evolution(path: Path, run: EvolveRun, values: dict, given_seeds, options, callbacks=()) -> None:
    """``evolve --resume RUN.h5`` (``path``): check the options against the run, then continue
    it (``run.restarts``: how often the ``--workers`` job starts again after a lost rank)."""
    if given_seeds is not None:
        if len(given_seeds) != 1:
            raise UsageError("--resume continues one run: give at most one --seed")
        values = {**values, "seed": given_seeds[0]}
    wanted, done_generations, steps_done, finished = resume_state(path, values)
    if finished and not wanted.goes_on(done_generations, steps_done):
        if env_rank() == 0:
            _log(nothing_to_do(path, done_generations, steps_done))
        return

    plain_every()
    check_evolve_memory([wanted], build_agent(wanted).n_params)
    if env_rank() == 0:
        check_writable(path)
    if run.check:
        _log(resume_check(path, wanted, done_generations, steps_done))
        return
    start_ranks(run.workers + 1, run.restarts)
    run_on_farm([(wanted, Path(path), True)], run, options, callbacks)


# --------------------------------------------------------------------------- the evolve command


def evolve_command(request: Request) -> None:
    """``synapto evolve``: ``request`` holds its options (:data:`synapto.evolution.config.EVOLVE_OPTIONS`).  The run's
    values (the command line's over a config file's), their checks, then ``--resume`` or new runs."""
    given = {k: request.values[k] for k in VALUE_OPTIONS if k in request.given}
    if "hidden" in given:
        given["hidden"] = layer_sizes("--hidden", given["hidden"])
    run = request.build(EvolveRun)
    tables = {k: request.values[k] for k in TABLES}
    file = {} if run.config is None else file_values(run.config)
    values = run_values(file, given, tables, defaults=run.resume is None)
    given_seed = values.pop("seed", None)  # (resuming: None when neither the file nor the command line gave it)
    seeds = _seeds([0] if given_seed is None else given_seed)
    run = dataclasses.replace(run, **{k: values.pop(k) for k in EVOLVE_RUN_KEYS if k in values})
    if "population_per_worker" in values:  # resolved once, against the ranks but one under MPI (--workers ignored)
        resolve_population(values, _rank_count() - 1 if under_mpi() else run.workers)
    options = request.build(RunOptions)
    callbacks = tracking_callbacks(run.tensorboard, run.live_log, len(seeds))
    if run.resume is not None:
        if "out" not in given and run.out is not None:
            raise UsageError(
                f"--config {run.config} sets out = {str(run.out)!r}, but --resume continues "
                f"RUN.h5 in place: resume without --config (the run file holds its config)"
            )
        if run.out is not None or run.force:
            raise UsageError("--resume continues RUN.h5 in place; --out/--force cannot be used with it")
        resume_evolution(run.resume, run, values, None if given_seed is None else seeds, options, callbacks)
        return
    default_run = run.config is None and not any(tables.values()) and not set(given) - {"seed", "workers", "out"}
    new_evolution(run, values, seeds, options, callbacks, default_run)


def new_evolution(run: EvolveRun, values: dict, seeds: list[int], options, callbacks=(), default_run=False) -> None:
    """Start new runs of ``values``, one per seed, as ``run`` says (``default_run``: the
    default experiment, described first)."""
    configs, outs = new_runs(values, seeds, run.out)
    agent = check_runs(configs, outs, run.force)  # everything we can, before starting processes
    if default_run and env_rank() == 0:
        _log(defaults.describe(configs[0], run.workers))
    if run.check:
        _log(would_run(configs, outs, agent, run.workers))
        return
    start_ranks(run.workers + 1, run.restarts)
    jobs = [(cfg, o, False) for cfg, o in zip(configs, outs)]
    run_on_farm(jobs, run, options, callbacks)


def _seeds(value) -> list[int]:
    seeds = value if isinstance(value, (list, tuple)) else [value]
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise UsageError(f"--seed must be one or more integers >= 0, got {value!r}")
    return list(seeds)


def new_runs(values: dict, seeds: list[int], out_path) -> tuple[list, list[Path]]:
    """The configs of new runs, one per seed, and their run files (``--out``, else
    ``runs/<env>_<agent>_s<seed>.h5``)."""
    try:
        configs = [EvolveConfig(**values, seed=s) for s in seeds]
    except TypeError as exc:
        raise UsageError(f"bad option value: {exc}") from None
    first = configs[0]
    if out_path is None:
        out_path = Path("runs") / f"{first.env.replace('/', '_').replace(':', '_')}_{first.agent.split(':')[-1]}.h5"
        outs = [out_for_seed(out_path, c.seed, 2) for c in configs]
    else:
        outs = [out_for_seed(Path(out_path), c.seed, len(configs)) for c in configs]
    check_distinct(seeds, outs)
    return configs, outs


def would_run(configs, outs, agent, n_workers: int) -> str:
    """``--check``'s report: what would run, its budget, where, and how long it may take."""
    first = configs[0]
    ranks = f"{n_workers} worker(s), {n_workers + 1} MPI ranks" if n_workers else "no workers (this process)"
    share = f" ({first.population_per_worker} per worker)" if first.population_per_worker else ""
    return (
        f"ok: {len(configs)} run(s): {first.strategy} on {first.env}, {first.agent} {list(first.hidden)} "
        f"({agent.n_params:,} parameters), population {first.population}{share} -> {', '.join(map(str, outs))}\n"
        f"budget: {Budget(first.generations, first.max_env_steps).describe()}; {ranks}; "
        f"{estimate(first, n_workers)}"
    )
