"""``synapto plot``: learning curves of evolution and PPO runs on one or more x axes.

Runs whose configurations differ only in the seed form a group, drawn as the mean
over its seeds with a band (min-max or +- one standard deviation).  On the
generation axis the seeds are aligned by generation (epoch for PPO) over their
common length; on env steps and wall time every seed is interpolated onto one
grid over the range all seeds reach.

Upper panel: best, elite-mean and population-mean fitness of evolution runs (and
the best validation fitness of runs that validate their top candidates); average
episode return (``AverageEpRet``) of PPO runs.  Env steps count every environment
step a run took: training plus validation episodes for evolution,
``TotalEnvInteracts`` for PPO.  Lower panel (when there is
an evolution run): surviving connections, the population's mean and the
champion's.  One column per x axis, so ``--x env-steps,wall-time`` puts sample
efficiency and wall-clock efficiency side by side.
"""

from __future__ import annotations

import colorsys
import json
import re
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.common.errors import UsageError
from synapto.envs import EnvOptions
from synapto.store.series import RunSeries, read_run
from synapto.viz import AXES, check_image_out, matplotlib_figure, write_output

BANDS = ("minmax", "std", "none")
EVOLVE_CURVES = ("best", "elite-mean", "pop-mean", "validation")
CURVE_LABELS = {
    "best": "best fitness",
    "elite-mean": "elite-mean fitness",
    "pop-mean": "pop-mean fitness",
    "validation": "best validation fitness",
}
AXIS_LABELS = {"generation": "generation", "env-steps": "environment steps", "wall-time": "wall-clock time"}


def parse_axes(values) -> list[str]:
    """``["env-steps,wall-time"]`` or ``["env-steps", "wall-time"]`` -> the axes, checked."""
    out = []
    for v in values or ["generation"]:
        for a in str(v).split(","):
            a = a.strip().lower().replace("_", "-")
            if not a:
                continue
            if a not in AXES:
                raise UsageError(f"--x {a!r} is not an axis; choose from {', '.join(AXES)}")
            if a not in out:
                out.append(a)
    if not out:
        raise UsageError(f"--x needs an axis: {', '.join(AXES)}")
    return out


def parse_curves(values) -> list[str]:
    out = []
    for v in values or list(EVOLVE_CURVES):
        for c in str(v).split(","):
            c = c.strip()
            if c and c not in EVOLVE_CURVES:
                raise UsageError(f"--curves {c!r} is unknown; choose from {', '.join(EVOLVE_CURVES)}")
            if c and c not in out:
                out.append(c)
    return out or list(EVOLVE_CURVES)


@dataclass
class Group:
    """Runs of one configuration (seeds differ)."""

    key: str
    runs: list[RunSeries]
    label: str = ""

    @property
    def kind(self) -> str:
        return self.runs[0].kind


def group_runs(runs: list[RunSeries], labels: list[str] | None = None) -> list[Group]:
    """Group runs (first appearance order) and name the groups.

    Without ``labels``, runs of one configuration minus the seed form a group, named after
    its run files (their stem without ``_s<seed>``: a shipped config's name, as ``evolve
    --config NAME`` writes ``runs/NAME.h5``), with the agent and hidden sizes (PPO and its
    hidden sizes) and the seeds.  ``labels`` (``--label``, one per run) name the runs
    instead: runs with one label form one group, drawn under that label."""
    check_labels(labels, len(runs))
    groups: dict[str, Group] = {}
    for i, r in enumerate(runs):
        key = r.group_key if labels is None else json.dumps([labels[i], r.kind, r.env])
        groups.setdefault(key, Group(key, [], labels[i] if labels is not None else "")).runs.append(r)
    out = list(groups.values())
    for g in out:
        seeds = [r.seed for r in g.runs]
        if labels is None and len(set(seeds)) != len(seeds):
            dup = sorted({s for s in seeds if seeds.count(s) > 1})
            sys.stderr.write(f"warning: {g.runs[0].short_label}: several files with seed(s) {dup}\n")
    if labels is None:
        names = [_run_name(g.runs) for g in out]
        for g, name in zip(out, names):
            n = len(g.runs)
            count = f"{n} seeds" if n > 1 else f"seed {g.runs[0].seed}"
            g.label = f"{name} ({g.runs[0].short_label}, {count})"
        _tell_apart(out)
    return out


def check_labels(labels: list[str] | None, n_runs: int) -> None:
    """``--label``: none, or one per run file."""
    if labels is not None and len(labels) != n_runs:
        raise UsageError(f"--label is given {len(labels)} time(s) for {n_runs} run file(s): give one per run file")


def _run_name(runs: list[RunSeries]) -> str:
    """What a group's run files are called: their common stem without ``_s<seed>``."""
    stems = [re.sub(r"_s\d+$", "", r.path.stem) for r in runs]
    common = stems[0]
    for stem in stems[1:]:
        while not stem.startswith(common):
            common = common[:-1]
    return common.rstrip("_-. ") or stems[0]


def _tell_apart(groups: list[Group]) -> None:
    """Number the groups whose names are alike (same file names, same agent, other settings)."""
    labels = [g.label for g in groups]
    for i, g in enumerate(groups):
        if labels.count(g.label) > 1:
            g.label = f"{g.label} #{labels[: i + 1].count(g.label)}"


def aggregate(xs: list[np.ndarray], ys: list[np.ndarray], axis: str, band: str):
    """``(x, mean, low, high)`` over seeds; low/high are None for a single run or band "none"."""
    if len(xs) == 1:
        return xs[0], ys[0], None, None
    if axis == "generation":
        n = min(len(x) for x in xs)
        x = xs[0][:n]
        stack = np.stack([y[:n] for y in ys])
    else:
        lo, hi = max(x[0] for x in xs), min(x[-1] for x in xs)
        if hi <= lo:  # the seeds' ranges do not overlap: use their union, averaging what exists
            lo, hi = min(x[0] for x in xs), max(x[-1] for x in xs)
        x = np.linspace(lo, hi, 400) if hi > lo else np.array([lo])
        stack = np.stack(
            [np.where((x >= xi[0]) & (x <= xi[-1]), np.interp(x, xi, yi), np.nan) for xi, yi in zip(xs, ys)]
        )
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns of non-finite fitness
        mean = np.nanmean(stack, axis=0)
        if band == "minmax":
            low, high = np.nanmin(stack, axis=0), np.nanmax(stack, axis=0)
        elif band == "std":
            sd = np.nanstd(stack, axis=0)
            low, high = mean - sd, mean + sd
        else:
            low = high = None
    return x, mean, low, high


def _time_unit(seconds: float) -> tuple[float, str]:
    if seconds > 3 * 3600:
        return 3600.0, "h"
    if seconds > 600:
        return 60.0, "min"
    return 1.0, "s"


def _interp_ready(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop rows with a non-finite x and keep x increasing (what interpolation needs)."""
    ok = np.isfinite(x)
    x, y = x[ok], y[ok]
    if len(x) > 1 and np.any(np.diff(x) < 0):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    return x, y


def plot_runs(
    paths: list[Path],
    out: Path,
    axes=("generation",),
    band: str = "minmax",
    curves=EVOLVE_CURVES,
    connections: bool = True,
    width: int | None = None,
    height: int | None = None,
    dpi: int = 100,
    title: str | None = None,
    log=print,
    labels: list[str] | None = None,
) -> Path:
    """Draw the learning curves of ``paths`` into ``out`` (.png or .svg); ``labels``: one
    legend name per run (:func:`group_runs`)."""
    out = Path(out)
    suffix = check_image_out(out, (".png", ".svg"))
    axes = parse_axes(axes)
    curves = parse_curves(curves)
    if band not in BANDS:
        raise UsageError(f"--band must be one of {', '.join(BANDS)}, got {band!r}")
    if not paths:
        raise UsageError("plot needs at least one run file")
    if dpi < 10:
        raise UsageError(f"--dpi must be >= 10, got {dpi}")
    check_labels(labels, len(paths))  # before any file is read
    runs = [read_run(p) for p in paths]
    fig, groups = curves_figure(runs, axes, band, curves, connections, width, height, dpi, title, labels)
    write_output(out, lambda path: fig.savefig(path, format=suffix[1:], dpi=dpi))
    log(f"plot: {len(runs)} run(s) in {len(groups)} group(s) -> {out}")
    return out


def curves_figure(
    runs: list[RunSeries],
    axes,
    band: str = "minmax",
    curves=EVOLVE_CURVES,
    connections: bool = True,
    width: int | None = None,
    height: int | None = None,
    dpi: int = 100,
    title: str | None = None,
    labels: list[str] | None = None,
):
    """The figure of :func:`plot_runs` (a matplotlib ``Figure``, drawn) and the run groups."""
    Figure = matplotlib_figure("plot")
    axes, curves = parse_axes(axes), parse_curves(curves)
    groups = group_runs(runs, labels)
    envs = list(dict.fromkeys(g.runs[0].env for g in groups))  # one row of fitness panels per env
    show_connections = connections and any(g.kind == "evolve" and _prunes(g) for g in groups)
    rows = len(envs) + (1 if show_connections else 0)
    ncols = len(axes)
    width = width or 640 * ncols
    height = height or (480 + 240 * (rows - 1))
    if width < 100 or height < 100:
        raise UsageError(f"--width and --height must be >= 100 pixels, got {width}x{height}")
    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi, layout="constrained")
    grid = fig.add_gridspec(rows, ncols, height_ratios=[2] * len(envs) + ([1] if show_connections else []))
    lines = _line_styles(groups, curves)

    for col, axis in enumerate(axes):
        tops, bottom = _column_panels(fig, grid, envs, col, show_connections)
        scale, unit = _x_scale(runs, axis)
        drawn = _draw_groups(groups, axis, tops, bottom, curves, lines, band, scale)
        if drawn == 0 and axis == "wall-time":
            raise UsageError("no run file has wall-clock timing (/timing): cannot plot --x wall-time")
        _label_column(tops, bottom, groups, axis, unit, col, ncols)
    band_note = {"minmax": "band: min-max over seeds", "std": "band: mean +- std over seeds", "none": ""}[band]
    multi = any(len(g.runs) > 1 for g in groups)
    fig.suptitle(
        title or (", ".join(sorted(envs)) + (f"  ({band_note})" if multi and band_note else "")), fontsize="medium"
    )
    _legend(fig, lines)
    return fig, groups


def _column_panels(fig, grid, envs: list[str], col: int, show_connections: bool):
    """Column ``col``'s panels, sharing one x axis: ``({env: fitness panel}, connections panel or None)``."""
    tops = {env: fig.add_subplot(grid[r, col]) for r, env in enumerate(envs)}
    first = tops[envs[0]]
    for ax in tops.values():
        if ax is not first:
            ax.sharex(first)
    bottom = fig.add_subplot(grid[len(envs), col], sharex=first) if show_connections else None
    return tops, bottom


def _x_scale(runs: list[RunSeries], axis: str) -> tuple[float, str]:
    """The factor and unit of the x axis (wall time in a readable unit; others as they are)."""
    if axis != "wall-time":
        return 1.0, ""
    walls = [r.x["wall-time"] for r in runs if r.x["wall-time"] is not None and len(r.x["wall-time"])]
    return _time_unit(max((float(np.nanmax(w)) for w in walls), default=0.0))


def _draw_groups(groups, axis: str, tops: dict, bottom, curves, lines: dict, band: str, scale: float) -> int:
    """Every group's curves on ``axis`` (and their connections on ``bottom``); the fitness
    curves drawn.  Runs without the axis's data are left out with a warning."""
    drawn = 0
    for g in groups:
        members = [r for r in g.runs if r.x[axis] is not None]
        for r in g.runs:
            if r.x[axis] is None:
                sys.stderr.write(f"warning: {r.path} has no wall-clock timing; left out of the wall-time panel\n")
        if not members:
            continue
        top = tops[g.runs[0].env]
        names = curves if g.kind == "evolve" else ["return"]
        for name in names:
            having = [r for r in members if name in r.curves]
            if having:
                color, label = lines[(g.key, name)]
                drawn += _line(top, having, axis, lambda r, n=name: r.curves[n], band, scale, color, "-", label)
        if bottom is not None and g.kind == "evolve":
            color = lines[(g.key, curves[0])][0] if (g.key, curves[0]) in lines else "0.2"
            for name, style in (("mean", "-"), ("champion", "--")):
                if all(name in r.connections for r in members):
                    _line(
                        bottom,
                        members,
                        axis,
                        lambda r, n=name: r.connections[n],
                        band,
                        scale,
                        color,
                        style,
                        f"{g.label}: {name}",
                    )
    return drawn


def _label_column(tops: dict, bottom, groups, axis: str, unit: str, col: int, ncols: int) -> None:
    """Axis labels, titles, grids and ticks of one column; the connections' legend in the last."""
    kinds = {g.kind for g in groups}
    xlabel = AXIS_LABELS[axis]
    if axis == "generation" and kinds == {"ppo"}:
        xlabel = "epoch"
    elif axis == "generation" and len(kinds) > 1:
        xlabel = "generation (PPO: epoch)"
    if unit:
        xlabel += f" ({unit})"
    lowest = bottom or list(tops.values())[-1]
    lowest.set_xlabel(xlabel)
    for env, top in tops.items():
        env_kinds = {g.kind for g in groups if g.runs[0].env == env}
        if col == 0:
            fitness = "fitness"
            if any(g.kind == "evolve" and shaped(g.runs[0].config) for g in groups if g.runs[0].env == env):
                fitness = "fitness (training: shaped)"
            top.set_ylabel(
                f"{fitness} (evolution) / episode return (PPO)"
                if len(env_kinds) > 1
                else (fitness if env_kinds == {"evolve"} else "average episode return")
            )
        if len(tops) > 1:
            top.set_title(env, fontsize="small")  # each env has a y axis of its own
        if top is not lowest:
            top.tick_params(labelbottom=False)
    if col == 0 and bottom is not None:
        bottom.set_ylabel("surviving connections")
    for ax in [*tops.values(), bottom]:
        if ax is not None:
            ax.grid(True, alpha=0.3)
            if axis == "env-steps":
                ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
            if axis == "generation":
                from matplotlib.ticker import MaxNLocator

                ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # generations and epochs are whole
    if col == ncols - 1 and bottom is not None and bottom.lines:
        from matplotlib.lines import Line2D

        bottom.legend(
            handles=[
                Line2D([], [], color="0.2", ls="-", label="population mean"),
                Line2D([], [], color="0.2", ls="--", label="champion"),
            ],
            fontsize="x-small",
            loc="best",
            framealpha=0.8,
        )


def _prunes(group) -> bool:
    """Whether a group's connection counts change (a panel of flat lines says nothing)."""
    for r in group.runs:
        for y in r.connections.values():
            y = np.asarray(y, dtype=np.float64)
            y = y[np.isfinite(y)]
            if y.size and np.ptp(y) > 0:
                return True
    return False


def _line_styles(groups, curves) -> dict:
    """``(group key, curve) -> (colour, legend label)``: every line drawn has its own colour of
    distinct hue (matplotlib's qualitative cycle without its grey, then hues evenly spread
    around the colour wheel for more lines), so that the best, elite-mean, pop-mean and
    validation curves of one run never look alike."""
    drawn = []
    for g in groups:
        names = curves if g.kind == "evolve" else ["return"]
        drawn += [(g, n) for n in names if any(n in r.curves for r in g.runs)]
    palette: list[str | tuple[float, float, float]] = [f"C{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]
    if len(drawn) > len(palette):
        palette = [colorsys.hsv_to_rgb(i / len(drawn), 0.8, 0.8) for i in range(len(drawn))]
    return {(g.key, n): (palette[i], f"{g.label}: {_curve_label(g, n)}") for i, (g, n) in enumerate(drawn)}


def _curve_label(group, name: str) -> str:
    if name == "return":
        return "average episode return"
    if not shaped(group.runs[0].config):
        return CURVE_LABELS[name]
    return CURVE_LABELS[name] + (" (unmodified task)" if name == "validation" else " (shaped training)")


def shaped(config: dict) -> bool:
    """Whether an evolution run's training episodes differ from its task (``reward_shift``
    or :mod:`synapto.shaping`'s options): its training fitness is not the task's return."""
    envs = EnvOptions.parse(config.get("env_options") or {})
    return bool(envs.reward_shift) or envs.shaping.active


def _legend(fig, lines) -> None:
    """One legend below the panels, an entry per line, in as many columns as fit the
    figure's width (the layout makes room for its height): it never leaves the image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.lines import Line2D

    labels = [label for _, label in lines.values()]
    if not labels:
        return
    FigureCanvasAgg(fig)
    ncol, wrap = len(labels), max(len(t) for t in labels)
    while True:
        handles = [
            Line2D([], [], color=c, lw=2.0, label=textwrap.fill(label, wrap))
            for (c, _), label in zip(lines.values(), labels)
        ]
        legend = fig.legend(handles=handles, loc="outside lower center", fontsize="small", frameon=False, ncol=ncol)
        fig.canvas.draw()
        box, room = legend.get_window_extent(), fig.bbox.width * 0.98
        if box.width <= room or wrap <= 12:
            return
        legend.remove()
        if ncol > 1:
            ncol -= 1
        else:  # one column and still too wide: wrap the labels
            wrap = max(12, int(wrap * room / box.width) - 1)


def _line(ax, members, axis, get, band, scale, color, style, label) -> int:
    xs, ys = [], []
    for r in members:
        x, y = _interp_ready(np.asarray(r.x[axis], dtype=np.float64), get(r))
        if len(x):
            xs.append(x / scale)
            ys.append(y)
    if not xs:
        return 0
    x, mean, low, high = aggregate(xs, ys, axis, band)
    marker = "o" if len(x) == 1 else None
    ax.plot(x, mean, style, color=color, label=label, lw=1.6, marker=marker)
    if low is not None:
        ax.fill_between(x, low, high, color=color, alpha=0.15, lw=0)
    return 1
