"""``synapto draw``: an evolved network as a graph, inputs (left) to outputs (right).

Only surviving (non-zero) connections are drawn; edge width grows with the
weight's magnitude, edge colour gives its sign.  hebbian-dag networks are layered
DAGs: a connection that skips layers is drawn as a curve.  For hebbian-dag a
second panel sets edge width by Hebbian activity: the champion plays one episode
(test seed 0 of the run, a fresh env) and each connection's mean ``|trace|``
(``policy.trace_stats()``, what pruning uses) is shown on a square-root scale.

What pruning left is drawn to be read at a glance: hidden units without a path
from an input to an action are left out (``--all-units`` keeps them, hollow), the
kept hidden units are ordered by where their inputs come from (fewer crossings),
connections that cannot change an action (into an output that never acts, such as
hebbian-dag's modulation unit without neuromodulation) are dashed and grey, and the
inputs and actions of known environments carry their names.  Inputs and outputs
with no path are drawn hollow.  The title gives the surviving connections, the
share of the dense network they are, and the hidden units in use.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.common.errors import UsageError
from synapto.common.seeding import test_seeds
from synapto.envs import make_env
from synapto.policies import Pick, pick_genome
from synapto.store.series import run_kind
from synapto.viz import check_image_out, matplotlib_figure, write_output


@dataclass
class Net:
    """A layered network read off a genome: units per layer and surviving edges."""

    sizes: list[int]
    labels: list[list[str]]
    src_layer: np.ndarray
    src_unit: np.ndarray
    dst_layer: np.ndarray
    dst_unit: np.ndarray
    index: np.ndarray  #: position of each edge's weight in the genome
    weight: np.ndarray
    modulation_unit: bool  #: hebbian-dag's output unit 0


def network(agent, genome: np.ndarray) -> Net:
    """The layers and surviving connections of ``genome`` under ``agent``'s public
    :meth:`~synapto.agents.base.Agent.layout`."""
    layout = agent.layout()
    if layout is None:
        raise UsageError(
            f"draw needs a layered agent (one whose layout() is not None); {type(agent).__name__} has none"
        )
    edges: list[list[np.ndarray]] = [[], [], [], [], []]  # src layer, src unit, dst layer, dst unit, genome index
    for block in layout.blocks:
        n_cols = block.shape[1]
        r, c = np.nonzero(genome[block.index].reshape(block.shape))
        for e, v in zip(
            edges,
            (np.full(len(r), block.source), r, np.full(len(r), block.target), c, block.index.start + r * n_cols + c),
        ):
            e.append(v)
    sizes = list(layout.sizes)
    cat = [np.concatenate(e).astype(np.int64) if e else np.zeros(0, np.int64) for e in edges]
    labels = [[f"x{k}" for k in range(sizes[0])]] + [[""] * n for n in sizes[1:-1]] + [list(layout.output_labels)]
    src_layer, src_unit, dst_layer, dst_unit, index = cat
    return Net(sizes, labels, src_layer, src_unit, dst_layer, dst_unit, index, genome[index], layout.modulation_unit)


def hebbian_activity(pick: Pick) -> tuple[np.ndarray | None, float, int]:
    """``(trace_stats, return, steps)`` of one episode of ``pick`` on the run's first test seed."""
    seed = int(test_seeds(pick.config.seed, 1)[0])
    policy = pick.agent.policy(pick.genome)
    act = pick.act(policy)
    env = make_env(pick.config.env, **pick.config.make_kwargs)
    try:
        obs, _ = env.reset(seed=seed)
        policy.reset()
        total, steps = 0.0, 0
        while True:
            action = act(obs)
            if not pick.agent.space.discrete and not np.all(np.isfinite(action)):
                break
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            steps += 1
            if terminated or truncated:
                break
    finally:
        env.close()
    policy.end_episode()
    return policy.trace_stats(), total, steps


#: names of the observations and actions of environments whose layout is known
_BIPEDAL_OBS = (
    "hull angle",
    "hull ang. v",
    "vx",
    "vy",
    "hip 1",
    "hip 1 speed",
    "knee 1",
    "knee 1 speed",
    "leg 1 contact",
    "hip 2",
    "hip 2 speed",
    "knee 2",
    "knee 2 speed",
    "leg 2 contact",
    *(f"lidar {k}" for k in range(10)),
)
NAMES = {
    "LunarLander-v3": (
        ("x", "y", "vx", "vy", "angle", "ang. v", "left leg", "right leg"),
        ("nothing", "left engine", "main engine", "right engine"),
    ),
    "CartPole-v1": (("cart x", "cart v", "pole angle", "pole ang. v"), ("push left", "push right")),
    "BipedalWalker-v3": (_BIPEDAL_OBS, ("hip 1", "knee 1", "hip 2", "knee 2")),
}


@dataclass
class View:
    """What one drawing shows of a :class:`Net`: the units drawn per layer (top to bottom),
    the edges drawn (indices into the net's), which of them are inert, the units with a path."""

    rows: list[np.ndarray]
    edges: np.ndarray
    inert: np.ndarray
    used: list[np.ndarray]  #: per layer, per unit: on a path from an input to an acting output
    labels: list[list[str]]
    left_out: int  #: hidden units without a path that are not drawn


def unit_paths(net: Net, inert_outputs=()) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(fed, reaches)`` per layer and unit: it receives from an input (through surviving
    connections), and it reaches an output that acts."""
    n = len(net.sizes)
    fed = [np.ones(net.sizes[0], bool)] + [np.zeros(k, bool) for k in net.sizes[1:]]
    for layer in range(1, n):
        into = net.dst_layer == layer
        for sl, su, du in zip(net.src_layer[into], net.src_unit[into], net.dst_unit[into]):
            fed[layer][du] |= fed[sl][su]
    acting = np.ones(net.sizes[-1], bool)
    acting[list(inert_outputs)] = False
    reach = [np.zeros(k, bool) for k in net.sizes[:-1]] + [acting]
    for layer in range(n - 2, -1, -1):
        out = net.src_layer == layer
        for su, dl, du in zip(net.src_unit[out], net.dst_layer[out], net.dst_unit[out]):
            reach[layer][su] |= reach[dl][du]
    return fed, reach


def view(net: Net, env: str, inert_outputs=(), all_units: bool = False) -> View:
    """The drawing of ``net``: hidden units without a path left out (unless ``all_units``),
    the kept ones ordered by the mean position of their sources, names for known envs."""
    fed, reach = unit_paths(net, inert_outputs)
    used = [f & r for f, r in zip(fed, reach)]
    n = len(net.sizes)
    keep = [np.ones(k, bool) if layer in (0, n - 1) or all_units else used[layer] for layer, k in enumerate(net.sizes)]
    rows: list[np.ndarray] = [np.arange(net.sizes[0])]
    place = [np.full(k, np.nan) for k in net.sizes]  # display position (0 = top) of each unit
    place[0][:] = np.arange(net.sizes[0]) / max(net.sizes[0] - 1, 1)
    for layer in range(1, n):
        units = np.flatnonzero(keep[layer])
        if layer < n - 1:  # hidden: by the mean position of the sources drawn so far
            centre = np.full(units.size, np.inf)
            for k, u in enumerate(units):
                src = (net.dst_layer == layer) & (net.dst_unit == u)
                ys = [
                    place[sl][su]
                    for sl, su in zip(net.src_layer[src], net.src_unit[src])
                    if not np.isnan(place[sl][su])
                ]
                if ys:
                    centre[k] = np.mean(ys)
            units = units[np.argsort(centre, kind="stable")]
        rows.append(units)
        place[layer][units] = np.arange(units.size) / max(units.size - 1, 1)
    drawn = np.array(
        [
            keep[sl][su] and keep[dl][du]
            for sl, su, dl, du in zip(net.src_layer, net.src_unit, net.dst_layer, net.dst_unit)
        ],
        dtype=bool,
    )
    edges = np.flatnonzero(drawn)
    inert = np.array(
        [not (fed[net.src_layer[e]][net.src_unit[e]] and reach[net.dst_layer[e]][net.dst_unit[e]]) for e in edges],
        dtype=bool,
    )
    labels = [list(x) for x in net.labels]
    obs, acts = NAMES.get(env, ((), ()))
    if len(obs) == net.sizes[0]:
        labels[0] = list(obs)
    if acts:
        outs = labels[-1]
        named = [k for k, name in enumerate(outs) if name.startswith("a") and name[1:].isdigit()]
        if len(named) == len(acts):
            for k, name in zip(named, acts):
                outs[k] = name
    left_out = sum(int(k.size - np.count_nonzero(kp)) for k, kp in zip(used[1:-1], keep[1:-1]))
    return View(rows, edges, inert, used, labels, left_out)


def _positions(v: View, sizes: list[int]) -> list[dict[int, float]]:
    """y of every drawn unit, per layer (unit 0 of the drawing at the top)."""
    span = max(max(len(r) for r in v.rows) - 1, 1)
    out = []
    for r in v.rows:
        n = len(r)
        step = min(span / max(n - 1, 1), 2.5) if n > 1 else 0.0
        out.append({int(u): float(-(k - (n - 1) / 2) * step) for k, u in enumerate(r)})
    return out


def _edge_paths(net: Net, v: View, ys: list[dict[int, float]], dx: float) -> list[np.ndarray]:
    span = max(max(len(r) for r in v.rows) - 1, 1)
    t = np.linspace(0.0, 1.0, 24)[:, None]
    paths = []
    for e in v.edges:
        sl, su, dl, du = net.src_layer[e], net.src_unit[e], net.dst_layer[e], net.dst_unit[e]
        p0 = np.array([sl * dx, ys[sl][su]])
        p2 = np.array([dl * dx, ys[dl][du]])
        if dl - sl == 1:
            paths.append(np.stack([p0, p2]))
            continue
        mid = (p0 + p2) / 2
        side = 1.0 if mid[1] >= 0 else -1.0
        p1 = mid + np.array([0.0, side * 0.22 * span * (dl - sl - 1) + side * 0.1 * span])
        paths.append((1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t**2 * p2)
    return paths


def _panel(ax, net: Net, v: View, strength: np.ndarray, subtitle: str) -> None:
    """One drawing; ``strength`` per edge of ``net`` sets the widths."""
    dx = 3.0
    ys = _positions(v, net.sizes)
    _draw_edges(ax, net, v, _edge_paths(net, v, ys, dx), strength)
    _draw_units(ax, net, v, ys, dx)
    _frame(ax, net, v, dx, subtitle)


def _draw_edges(ax, net: Net, v: View, paths: list[np.ndarray], strength: np.ndarray) -> None:
    """The edges: width by ``strength``, red positive, blue negative, inert ones grey and dashed."""
    from matplotlib.collections import LineCollection

    if not len(paths):
        return
    s = strength[v.edges]
    top = float(np.max(s)) if np.max(s) > 0 else 1.0
    widths = 0.15 + 2.85 * np.clip(s / top, 0.0, 1.0)
    alpha = 0.6 if len(paths) <= 100 else max(0.3, 0.6 * np.sqrt(100 / len(paths)))  # crowded: lighter
    w = net.weight[v.edges]
    colors = np.where(w[:, None] > 0, np.array([[0.84, 0.15, 0.16, alpha]]), np.array([[0.12, 0.47, 0.71, alpha]]))
    colors[v.inert] = (0.6, 0.6, 0.6, 0.5)
    for inert, style in ((False, "solid"), (True, (0, (2, 2)))):
        pick = np.flatnonzero(v.inert == inert)
        order = pick[np.argsort(widths[pick], kind="stable")]
        if order.size:
            lines = [paths[k] for k in order]
            ax.add_collection(
                LineCollection(
                    lines, linewidths=widths[order], colors=colors[order], linestyles=style, capstyle="round", zorder=1
                )
            )


def _draw_units(ax, net: Net, v: View, ys: list[dict[int, float]], dx: float) -> None:
    """The units: inputs green, hidden grey, outputs orange (modulation purple); hollow without a path."""
    n_layers = len(net.sizes)
    fontsize = 7 if max(len(r) for r in v.rows) <= 30 else 5
    for layer, units in enumerate(v.rows):
        color = "C2" if layer == 0 else ("C1" if layer == n_layers - 1 else "0.35")
        for u in units:
            face = "C4" if layer == n_layers - 1 and net.modulation_unit and u == 0 else color
            x, y = layer * dx, ys[layer][int(u)]
            if v.used[layer][u]:
                ax.scatter([x], [y], s=60, c=[face], edgecolors="black", linewidths=0.6, zorder=3)
            else:
                ax.scatter([x], [y], s=60, facecolors="white", edgecolors="0.6", linewidths=0.8, zorder=3)
            label = v.labels[layer][u]
            if label:
                ha, off = ("right", -0.35) if layer == 0 else ("left", 0.35)
                shade = "black" if v.used[layer][u] else "0.55"
                ax.text(x + off, y, label, ha=ha, va="center", fontsize=fontsize, zorder=4, color=shade)


def _frame(ax, net: Net, v: View, dx: float, subtitle: str) -> None:
    """Limits, layer names and the subtitle of one drawing."""
    n_layers = len(net.sizes)
    span = max(max(len(r) for r in v.rows) - 1, 1)
    ax.set_xlim(
        -1.2 - (1.0 if any(len(t) > 4 for t in v.labels[0]) else 0.0),
        (n_layers - 1) * dx + 1.2 + (1.0 if any(len(t) > 4 for t in v.labels[-1]) else 0.0),
    )
    bulge = 0.22 * span * max(n_layers - 3, 0) / 2 + 0.1 * span if n_layers > 2 else 0
    ax.set_ylim(-span / 2 - 0.8 - bulge, span / 2 + 0.8 + bulge)
    ax.set_xticks([layer * dx for layer in range(n_layers)])
    ax.set_xticklabels(
        ["inputs"]
        + [f"hidden {k + 1}\n{len(v.rows[k + 1])} of {net.sizes[k + 1]} units" for k in range(n_layers - 2)]
        + ["outputs"],
        fontsize="small",
    )
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(subtitle, fontsize="small")


def draw_run(
    path: Path,
    out: Path,
    generation: int | None = None,
    individual: int | None = None,
    activity: bool = True,
    width: int | None = None,
    height: int | None = None,
    dpi: int = 100,
    all_units: bool = False,
    log=print,
) -> dict:
    """Draw the champion (or ``--generation/--individual``) of an evolution run into ``out``."""
    out = Path(out)
    suffix = check_image_out(out, (".png", ".svg"))
    if dpi < 10:
        raise UsageError(f"--dpi must be >= 10, got {dpi}")
    if run_kind(path) != "evolve":
        raise UsageError(
            f"{str(path)!r} is a PPO run: draw shows evolved (pruned) networks; a PPO policy is a dense MLP"
        )
    Figure = matplotlib_figure("draw")
    pick = pick_genome(path, generation, individual)
    net = network(pick.agent, pick.genome)
    layout = pick.agent.layout()
    assert layout is not None  # network() refuses agents without one
    v = view(net, pick.config.env, layout.inert_outputs, all_units)
    panels = _panels(pick, net, v, activity)
    width = width or 720 * len(panels)
    height = height or 600
    if width < 100 or height < 100:
        raise UsageError(f"--width and --height must be >= 100 pixels, got {width}x{height}")
    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (strength, subtitle) in zip(axes, panels):
        _panel(ax, net, v, strength, subtitle)
    n_edges, total = len(net.weight), pick.agent.n_params
    hidden_used = sum(int(np.count_nonzero(u)) for u in v.used[1:-1])
    units = _title(fig, pick, v, n_edges, hidden_used)
    write_output(out, lambda path: fig.savefig(path, format=suffix[1:], dpi=dpi))
    log(f"draw: {pick.what}: {n_edges} of {total} connections ({units}) -> {out}")
    return {
        "connections": n_edges,
        "n_params": total,
        "panels": len(panels),
        "hidden_used": hidden_used,
        "drawn_edges": int(v.edges.size),
        "inert": int(v.inert.sum()),
    }


def _panels(pick: Pick, net: Net, v: View, activity: bool) -> list[tuple[np.ndarray, str]]:
    """``(strength per edge, subtitle)`` of each drawing: the weights, and a Hebbian agent's activity."""
    panels = [
        (
            np.abs(net.weight),
            "edge width: |weight|   colour: sign (red +, blue -)"
            + ("\ndashed: cannot change an action" if v.inert.any() else ""),
        )
    ]
    if activity and getattr(pick.agent, "name", "") == "hebbian-dag":
        stats, ret, steps = hebbian_activity(pick)
        if stats is not None:
            panels.append(
                (
                    np.sqrt(np.abs(np.asarray(stats)[net.index])),
                    f"edge width: Hebbian activity, sqrt of mean |trace|\n"
                    f"(one test episode: return {ret:.1f}, {steps} steps)",
                )
            )
    return panels


def _title(fig, pick: Pick, v: View, n_edges: int, hidden_used: int) -> str:
    """The figure's title (env, agent, the pick, connections and units in use); the units' words."""
    cfg, total = pick.config, pick.agent.n_params
    notes = [f"{int(v.inert.sum())} inert (dashed)"] if v.inert.any() else []
    notes += [f"{v.left_out} without a path left out"] if v.left_out else []
    units = f"{hidden_used} of {sum(cfg.hidden)} hidden units in use" if cfg.hidden else "linear, no hidden units"
    fig.suptitle(
        f"{cfg.env}: {cfg.agent} {list(cfg.hidden) if cfg.hidden else '(linear)'}\n{pick.what}\n"
        f"{n_edges} of {total} connections ({100 * n_edges / total:.0f} %), {units}"
        + (f" ({', '.join(notes)})" if notes else ""),
        fontsize="medium",
    )
    return units
