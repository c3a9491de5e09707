"""The small commands: ``replay`` (re-run stored evaluations bit for bit), ``show`` (what
a run is and how its test episodes ended) and ``slurm-script`` (the Slurm job script);
registered on the app by :func:`register`."""

from __future__ import annotations

import shlex
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from synapto.common.logs import say as _log


# --------------------------------------------------------------------------- replay
def replay(
    run: Annotated[Path, typer.Argument(help="Run file (.h5) written by `synapto evolve`.")],
    generation: Annotated[
        int | None,
        typer.Option(help="Generation of the evaluation to replay (with --individual).", show_default="none: --sample"),
    ] = None,
    individual: Annotated[
        int | None, typer.Option(help="Individual (index) to replay.", show_default="none: --sample")
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option(
            help="Replay K evaluations drawn at random across generations and individuals.",
            show_default="the one of --generation and --individual",
        ),
    ] = None,
    sample_seed: Annotated[int, typer.Option(help="Seed of the --sample choice (printed).")] = 0,
    validation: Annotated[
        bool,
        typer.Option(
            help="Replay validation evaluations (fresh episodes of the top candidates) instead of training ones."
        ),
    ] = False,
    workers: Annotated[int, typer.Option(help="Worker processes (relaunch under mpiexec -n N+1).")] = 0,
):
    """Re-run stored evaluations and check they are bit-identical (exit 0) or not (exit 1)."""
    from synapto.evolution.replay import plan_replay, run_replay
    from synapto.parallel.farm import make_farm
    from synapto.parallel.launch import start_ranks

    plan = plan_replay(run, generation, individual, sample, sample_seed, validation)
    start_ranks(workers + 1)

    farm, coordinator = make_farm()
    if not coordinator:
        return
    try:
        ok = run_replay(plan, farm, log=_log)
    finally:
        farm.close()
    raise typer.Exit(0 if ok else 1)


# --------------------------------------------------------------------------- show
def show(
    run: Annotated[Path, typer.Argument(help="Run file (.h5) of `synapto evolve` or `synapto ppo`.")],
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")] = False,
):
    """What a run is (task, agent, strategy, connections, env steps, wall time) and how its
    test episodes ended: count, mean return, mean action cost and mean length by outcome
    (finished, fell, out of time).  Reads the run file only: no episode is run."""
    from synapto.show import as_json, read_report, render

    report = read_report(run)
    typer.echo(as_json(report) if json else render(report), nl=False)


def slurm_script(
    python: Annotated[
        str | None, typer.Option(help="The Python the job runs synapto with (PY).", show_default="this Python")
    ] = None,
):
    """Print the Slurm job script of `synapto evolve` (synapto slurm-script > job.sh; OUT=runs/x.h5
    sbatch job.sh): a requeued or resubmitted job resumes its run file."""
    text = (resources.files("synapto") / "slurm_evolve.sh").read_text()
    default = "PY=${PY:-.venv/bin/python}"
    typer.echo(text.replace(default, f"PY=${{PY:-{shlex.quote(python or sys.executable)}}}", 1), nl=False)


def register(app: typer.Typer) -> None:
    app.command()(replay)
    app.command()(show)
    app.command("slurm-script")(slurm_script)
