"""synapto from Python: run an evolution from a config object, or drive a strategy with
your own evaluation loop (ask / tell).  Everything here is importable as ``synapto.X``.

    import synapto
    cfg = synapto.EvolveConfig(env="CartPole-v1", agent="pruned-mlp", hidden=(8,), population=16,
                               generations=5, strategy="openai-es")
    summary = synapto.evolve(cfg, "runs/cartpole.h5")          # the same run as the CLI's

    search = synapto.AskTell(synapto.build_agent(cfg), "openai-es", population=16, seed=0)
    for _ in range(5):
        genomes = search.ask()
        search.tell([my_fitness(x) for x in genomes])
    search.champion.genome
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from synapto.agents import build_agent
from synapto.envs import EnvOptions, make_env
from synapto.evolution.command import check_runs, run_on_farm
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import RunSummary, run_evolution
from synapto.evolution.resuming import nothing_to_do, resume_state
from synapto.evolution.run_options import EvolveRun, RunOptions
from synapto.evolution.worker.evaluate import evaluate
from synapto.evolution.worker.tasks import EvalResult
from synapto.parallel.farm import SerialFarm
from synapto.parallel.launch import mpi_job
from synapto.store import RunData
from synapto.tracking.callbacks import GenerationReport, StopRun, close_all, report_to


def evolve(
    config: EvolveConfig,
    out: str | Path,
    workers: int = 0,
    force: bool = False,
    resume: bool = False,
    options: RunOptions = RunOptions(),
    log: Callable[[str], None] = print,
    callbacks: Sequence[Callable] = (),
    task_timeout: float | None = None,
) -> RunSummary:
    """Run ``config`` into the run file ``out``, exactly as ``python -m synapto evolve``
    does (the run file is bit-identical to the command line's), and return its
    :class:`RunSummary`.

    The run's own options make the command line's request
    (:class:`~synapto.evolution.run_options.EvolveRun`, checked the same way).  ``workers=0``
    evaluates in this process; ``workers=N`` starts ``mpiexec -n N+1`` (the coordinator and N
    workers; :func:`synapto.parallel.launch.mpi_job`, the command line's way into MPI too) as a
    child process, whose ranks run the request where the command line's do
    (:func:`synapto.evolution.command.run_on_farm`), and waits for it: its output lines reach
    ``log`` and the ``callbacks`` their reports, as in this process.  ``resume=True``
    continues ``out`` from its checkpoint; it refuses (:class:`~synapto.common.errors.UsageError`)
    a missing file and a ``config`` that would change the run (only ``generations`` and
    ``max_env_steps`` may grow).  ``callbacks``: see :mod:`synapto.tracking.callbacks`.
    ``task_timeout`` (seconds, as ``--task-timeout``) bounds every evaluation: one that runs
    past it stops the run (:class:`synapto.evolution.loop.RunStopped`; with ``workers``,
    a ``RuntimeError`` naming it).
    """
    out = Path(out)
    run = EvolveRun(out=out, workers=workers, force=force, resume=out if resume else None, task_timeout=task_timeout)
    if resume:
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(EvolveConfig)}
        config, done, steps, finished = resume_state(out, values)
        if finished and not config.goes_on(done, steps):  # as the command line: the run stays as it is
            log(nothing_to_do(out, done, steps))
            return summary_of(out, 0.0)
    check_runs([config], [out], force, resuming=resume)  # the command line's checks
    if workers:
        return _evolve_mpi(config, out, run, options, log, callbacks)

    return run_evolution(
        config,
        out,
        SerialFarm(run.task_timeout),
        log=log,
        options=options,
        resume=resume,
        overwrite=force or resume,
        callbacks=callbacks,
    )


#: the prefix of the report lines an MPI child of :func:`evolve` sends its parent
REPORT_MARK = "\x1esynapto-report "


def _evolve_mpi(config, out: Path, run: EvolveRun, options, log, callbacks) -> RunSummary:
    """Run the request (into ``out``) in an MPI job of ``run.workers`` + 1 ranks (:func:`_mpi_main`), its lines
    passed to ``log`` and its reports to ``callbacks``."""
    request = {"config": config.to_json(), "run": dataclasses.asdict(run), "options": dataclasses.asdict(options)}
    args = json.dumps({**request, "reports": bool(callbacks)}, default=str)  # (paths as text)
    cmd, env = mpi_job(run.workers + 1, ["-c", "import sys, synapto.api as a; a._mpi_main(sys.argv[1])", args])
    t0 = time.perf_counter()
    tail: list[str] = []
    try:
        with subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        ) as proc:
            try:
                tail = _follow(proc, config, out, log, callbacks)
            except BaseException:  # a callback that raises (a pruned trial: synapto.tune) ends the MPI job
                proc.terminate()
                raise
            rc = proc.wait()
    finally:
        close_all(callbacks)
    if rc != 0:
        raise RuntimeError(f"the MPI run exited with code {rc}:\n" + "\n".join(tail))
    return summary_of(out, time.perf_counter() - t0)


def _follow(proc, config, out, log, callbacks) -> list[str]:
    """Pass the MPI child's lines to ``log`` and its reports to ``callbacks``, and answer each
    report with the callbacks' verdict (``go``, or ``stop REASON``: :class:`StopRun`); the
    child's last lines."""
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip("\n")
        if line.startswith(REPORT_MARK):
            data = json.loads(line[len(REPORT_MARK) :])
            report = GenerationReport(
                data["generation"], data["stats"], data["timing"], data["env_steps"], data["elapsed"], Path(out), config
            )
            reason = report_to(callbacks, report)
            try:
                proc.stdin.write("go\n" if reason is None else "stop " + " ".join(reason.split()) + "\n")
                proc.stdin.flush()
            except OSError:  # the child has gone: its exit code says why
                pass
            continue
        log(line)
        tail = [*tail, line][-20:]
    return tail


def summary_of(out: str | Path, wall: float) -> RunSummary:
    """The :class:`RunSummary` of the finished run file ``out``."""
    with RunData(out, kind="evolve") as run:
        champion = run.champion()
        returns = np.asarray(champion.test_returns, dtype=np.float64)
        tested = returns.size > 0 and run.tested
        return RunSummary(
            Path(out),
            run.completed,
            total_env_steps(run),
            float(champion.fitness),
            float(returns.mean()) if tested else None,
            float(returns.std()) if tested else None,
            wall,
        )


def total_env_steps(run) -> int:
    """Every env step of an open run file: training and validation (the last ``/stats`` row),
    the final selection and the champion test -- the total of the run's "done" line."""

    def last(name):
        rows = run.stats(name)
        return int(rows[-1]) if len(rows) else 0

    selection = run.selection()
    chosen = selection is not None and selection.chosen >= 0
    test = run.champion().test_steps if run.tested else ()
    return (
        last("env_steps")
        + last("validation_env_steps")
        + (int(selection.steps.sum()) if chosen else 0)
        + int(np.sum(test))
    )


def _mpi_main(args_json: str) -> None:
    """Entry point of every rank of :func:`evolve`'s MPI child: the request runs where the
    command line's runs (:func:`synapto.evolution.command.run_on_farm`)."""
    args = json.loads(args_json)
    run = EvolveRun(**args["run"])
    job = (EvolveConfig.from_json(args["config"]), Path(str(run.out)), run.resume is not None)
    callbacks = [_report_to_parent] if args["reports"] else []
    run_on_farm([job], run, RunOptions(**args["options"]), callbacks, log=lambda m: print(m, flush=True), signals=False)


def _report_to_parent(report) -> None:
    """Send ``report`` to :func:`_follow` and wait for its verdict; an end of input (a launcher
    that does not forward it) goes on."""
    print(
        REPORT_MARK
        + json.dumps(
            {
                "generation": report.generation,
                "stats": dict(report.stats),
                "timing": dict(report.timing),
                "env_steps": report.env_steps,
                "elapsed": report.elapsed,
            }
        ),
        flush=True,
    )
    verdict = sys.stdin.readline()
    if verdict.startswith("stop"):
        raise StopRun(verdict[len("stop ") :].strip())


def rollout(
    agent,
    genome: np.ndarray,
    env: str,
    seeds: Sequence[int] | np.ndarray,
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None,
    env_options=None,
) -> EvalResult:
    """Episodes of ``genome`` on ``env``, one per seed, each in a fresh environment reset
    with that seed (the evaluation ``synapto evolve`` runs): returns, steps, fitness
    (mean return minus the agent's penalty) and the trace statistics."""
    make = EnvOptions.parse(env_options).make_kwargs()  # the task itself: training shaping never applies here
    return evaluate(
        agent,
        partial(make_env, env, **make),
        np.asarray(genome, dtype=np.float64),
        np.asarray(seeds, dtype=np.int64),
        obs_norm=obs_norm,
    )


from synapto.asktell import AskTell  # noqa: E402  (ask / tell: synapto.asktell)
from synapto.policies import load_policy  # noqa: E402  (a stored agent in your own loop: synapto.policies)

__all__ = [
    "AskTell",
    "EvolveConfig",
    "RunOptions",
    "RunSummary",
    "StopRun",
    "build_agent",
    "evolve",
    "load_policy",
    "rollout",
]
