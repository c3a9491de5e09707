"""The commands ``plot``, ``render``, ``draw`` and ``export`` (see :mod:`synapto.viz`).

:func:`register` adds them to synapto's typer app.  Nothing here imports
matplotlib or imageio: the commands do, when they run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RUNS_HELP = "Run files (.h5) of `synapto evolve` or `synapto ppo`."


def _log(msg: str) -> None:
    print(msg, flush=True)


def plot(
    runs: Annotated[
        list[Path], typer.Argument(help=RUNS_HELP + " Seeds of one config are grouped.", show_default=False)
    ],
    out: Annotated[Path, typer.Option(help="Figure file: .png or .svg.")] = Path("plot.png"),
    x: Annotated[
        list[str] | None,
        typer.Option(
            "--x",
            help="x axis: generation, env-steps or wall-time; several (--x env-steps,wall-time) give one column each.",
            show_default="generation",
        ),
    ] = None,
    band: Annotated[str, typer.Option(help="Band around a group's mean over seeds: minmax, std or none.")] = "minmax",
    curves: Annotated[
        list[str] | None,
        typer.Option(
            help="Evolution curves, comma-separated: best, elite-mean, pop-mean, validation (best validation "
            "fitness, for runs that validate).",
            show_default="all",
        ),
    ] = None,
    connections: Annotated[bool, typer.Option(help="Lower panel with surviving connections (evolution runs).")] = True,
    title: Annotated[str | None, typer.Option(help="Figure title.", show_default="the env ids")] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            help="The legend's name of a run file, once per run file in their order; runs with one label are "
            "drawn as one group (mean and band).",
            show_default="the run files' names (without _s<seed>), agent and seeds",
        ),
    ] = None,
    width: Annotated[int | None, typer.Option(help="Width in pixels.", show_default="640 per x axis")] = None,
    height: Annotated[
        int | None,
        typer.Option(
            help="Height in pixels.", show_default="480, and 240 more per extra panel (a second env, connections)"
        ),
    ] = None,
    dpi: Annotated[int, typer.Option(help="Dots per inch (text size relative to the picture).")] = 100,
):
    """Learning curves of evolution and PPO runs (mean and band over seeds)."""
    from synapto.viz.plot import plot_runs

    plot_runs(
        runs,
        out,
        axes=x,
        band=band,
        curves=curves,
        connections=connections,
        width=width,
        height=height,
        dpi=dpi,
        title=title,
        log=_log,
        labels=label,
    )


def render(
    run: Annotated[Path, typer.Argument(help=RUNS_HELP, show_default=False)],
    out: Annotated[Path, typer.Option(help="Animation: .gif, or .mp4 (needs imageio-ffmpeg or av).")] = Path(
        "champion.gif"
    ),
    generation: Annotated[
        int | None,
        typer.Option(help="Generation of the individual to play (with --individual).", show_default="the champion"),
    ] = None,
    individual: Annotated[
        int | None, typer.Option(help="Individual (index) to play.", show_default="the champion")
    ] = None,
    params: Annotated[str, typer.Option(help="PPO runs: latest, final, or an epoch kept by --save-freq.")] = "latest",
    episodes: Annotated[int, typer.Option(help="Episodes, on the run's test seeds 0..N-1.")] = 1,
    max_steps: Annotated[
        int | None, typer.Option(help="Cut every episode after this many steps.", show_default="the env's time limit")
    ] = None,
    every: Annotated[int, typer.Option(help="Keep every K-th step as a frame.")] = 2,
    scale: Annotated[float, typer.Option(help="Frame size relative to the env's rendering.")] = 0.5,
    fps: Annotated[
        float | None, typer.Option(help="Frames per second.", show_default="real time, the env's render_fps / --every")
    ] = None,
):
    """Play the champion (or an individual, or a PPO policy) headless and write an animation."""
    from synapto.viz.render import render_run

    render_run(
        run,
        out,
        generation=generation,
        individual=individual,
        episodes=episodes,
        max_steps=max_steps,
        every=every,
        scale=scale,
        fps=fps,
        params=params,
        log=_log,
    )


def draw(
    run: Annotated[Path, typer.Argument(help="Run file (.h5) of `synapto evolve`.", show_default=False)],
    out: Annotated[Path, typer.Option(help="Figure file: .png or .svg.")] = Path("net.png"),
    generation: Annotated[
        int | None,
        typer.Option(help="Generation of the individual to draw (with --individual).", show_default="the champion"),
    ] = None,
    individual: Annotated[
        int | None, typer.Option(help="Individual (index) to draw.", show_default="the champion")
    ] = None,
    activity: Annotated[
        bool,
        typer.Option(help="hebbian-dag: add a panel with edge width by Hebbian activity (plays one test episode)."),
    ] = True,
    width: Annotated[int | None, typer.Option(help="Width in pixels.", show_default="720 per panel")] = None,
    height: Annotated[int, typer.Option(help="Height in pixels.")] = 600,
    dpi: Annotated[int, typer.Option(help="Dots per inch.")] = 100,
    all_units: Annotated[
        bool,
        typer.Option(
            "--all-units",
            help="Also draw hidden units without a path from an input to an action (hollow); "
            "by default they are left out.",
        ),
    ] = False,
):
    """Draw the champion's network: surviving connections, width by weight (and Hebbian activity)."""
    from synapto.viz.draw import draw_run

    draw_run(
        run,
        out,
        generation=generation,
        individual=individual,
        activity=activity,
        width=width,
        height=height,
        dpi=dpi,
        all_units=all_units,
        log=_log,
    )


def export(
    runs: Annotated[list[Path], typer.Argument(help=RUNS_HELP, show_default=False)],
    csv: Annotated[
        Path | None,
        typer.Option(
            help="Folder for <run name>.csv (created if needed; existing CSV files of the same name are replaced).",
            show_default="csv, unless --onnx or --npz is given",
        ),
    ] = None,
    onnx: Annotated[
        Path | None,
        typer.Option(
            help="Write the run's policy (the champion; PPO: the latest parameters) as an ONNX model: raw "
            "observation in, action out (needs the onnx extra).",
            show_default="off",
        ),
    ] = None,
    onnx_obs_dtype: Annotated[
        str, typer.Option(help="The ONNX model's observation input: float32 or float64 (cast to float64 inside).")
    ] = "float32",
    npz: Annotated[
        Path | None,
        typer.Option(
            help="Write the run's policy as named weight matrices with their layout (.npz).", show_default="off"
        ),
    ] = None,
):
    """Statistics as CSV (per generation or epoch), or a run's policy as ONNX / .npz."""
    from synapto.viz.export import csv_export, policy_export

    writes = []  # every output is checked before any is written
    if onnx is not None or npz is not None:
        writes.append(policy_export(runs, onnx, npz, log=_log, onnx_obs_dtype=onnx_obs_dtype))
    if csv is not None or not writes:
        writes.append(csv_export(runs, Path("csv") if csv is None else csv, log=_log))
    for write in writes:
        write()


def register(app: typer.Typer) -> None:
    """Add ``plot``, ``render``, ``draw`` and ``export`` to ``app``."""
    app.command("plot")(plot)
    app.command("render")(render)
    app.command("draw")(draw)
    app.command("export")(export)
