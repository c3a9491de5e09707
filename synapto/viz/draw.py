"""``synapto draw``: an evolved network as a graph, inputs (left) to outputs (right).

Only surviving (non-zero) connections are drawn; edge width grows with the
weight's magnitude, edge colour gives its sign.  hebbian-dag networks are layered
DAGs: a connection that skips layers is drawn as a curve.  For hebbian-dag a
second panel sets edge width by Hebbian activity: the champion plays one episode
(test seed 0 of the run, a fresh env) and each connection's mean ``|trace|``
(``policy.trace_stats()``, what pruning uses) is shown on a square-root scale.
Units without a path through them (every input or every output pruned) are drawn
hollow.  The title gives the number of surviving connections.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.errors import UsageError
from synapto.viz import Pick, check_image_out, matplotlib_figure, pick_genome, run_kind, write_output


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
        raise UsageError(f"draw needs a layered agent (one whose layout() is not None); "
                         f"{type(agent).__name__} has none")
    edges = [[], [], [], [], []]  # src layer, src unit, dst layer, dst unit, genome index
    for block in layout.blocks:
        n_cols = block.shape[1]
        r, c = np.nonzero(genome[block.index].reshape(block.shape))
        for e, v in zip(edges, (np.full(len(r), block.source), r, np.full(len(r), block.target), c,
                                block.index.start + r * n_cols + c)):
            e.append(v)
    sizes = list(layout.sizes)
    cat = [np.concatenate(e).astype(np.int64) if e else np.zeros(0, np.int64) for e in edges]
    labels = [[f"x{k}" for k in range(sizes[0])]] + [[""] * n for n in sizes[1:-1]] + [list(layout.output_labels)]
    return Net(sizes, labels, *cat, genome[cat[4]], layout.modulation_unit)


def hebbian_activity(pick: Pick) -> tuple[np.ndarray | None, float, int]:
    """``(trace_stats, return, steps)`` of one episode of ``pick`` on the run's first test seed."""
    from synapto.envs import make_env
    from synapto.seeding import test_seeds

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


def _positions(sizes: list[int]) -> list[np.ndarray]:
    span = max(max(sizes) - 1, 1)
    out = []
    for n in sizes:
        step = min(span / max(n - 1, 1), 2.5) if n > 1 else 0.0
        out.append((np.arange(n) - (n - 1) / 2) * step * -1.0)  # unit 0 at the top
    return out


def _edge_paths(net: Net, ys: list[np.ndarray], dx: float) -> list[np.ndarray]:
    span = max(max(net.sizes) - 1, 1)
    t = np.linspace(0.0, 1.0, 24)[:, None]
    paths = []
    for sl, su, dl, du in zip(net.src_layer, net.src_unit, net.dst_layer, net.dst_unit):
        p0 = np.array([sl * dx, ys[sl][su]])
        p2 = np.array([dl * dx, ys[dl][du]])
        if dl - sl == 1:
            paths.append(np.stack([p0, p2]))
            continue
        mid = (p0 + p2) / 2
        side = 1.0 if mid[1] >= 0 else -1.0
        p1 = mid + np.array([0.0, side * 0.22 * span * (dl - sl - 1) + side * 0.1 * span])
        paths.append((1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t ** 2 * p2)
    return paths


def _panel(ax, net: Net, strength: np.ndarray, subtitle: str) -> None:
    from matplotlib.collections import LineCollection

    dx = 3.0
    ys = _positions(net.sizes)
    paths = _edge_paths(net, ys, dx)
    if len(paths):
        top = float(np.max(strength)) if np.max(strength) > 0 else 1.0
        widths = 0.15 + 2.85 * np.clip(strength / top, 0.0, 1.0)
        alpha = 0.6 if len(paths) <= 100 else max(0.3, 0.6 * np.sqrt(100 / len(paths)))  # crowded: lighter
        colors = np.where(net.weight[:, None] > 0, np.array([[0.84, 0.15, 0.16, alpha]]),
                          np.array([[0.12, 0.47, 0.71, alpha]]))
        order = np.argsort(widths, kind="stable")
        ax.add_collection(LineCollection([paths[k] for k in order], linewidths=widths[order],
                                         colors=colors[order], capstyle="round", zorder=1))
    # units: inputs green, hidden grey, outputs orange (modulation purple); hollow if no path
    n_layers = len(net.sizes)
    has_in = [np.zeros(n, bool) for n in net.sizes]
    has_out = [np.zeros(n, bool) for n in net.sizes]
    has_in[0][:] = True
    has_out[-1][:] = True
    for sl, su, dl, du in zip(net.src_layer, net.src_unit, net.dst_layer, net.dst_unit):
        has_out[sl][su] = True
        has_in[dl][du] = True
    fontsize = 7 if max(net.sizes) <= 30 else 5
    for layer, (n, y) in enumerate(zip(net.sizes, ys)):
        color = "C2" if layer == 0 else ("C1" if layer == n_layers - 1 else "0.35")
        face = np.array([color] * n, dtype=object)
        if layer == n_layers - 1 and net.modulation_unit:
            face[0] = "C4"
        alive = has_in[layer] & has_out[layer]
        x = np.full(n, layer * dx)
        ax.scatter(x[alive], y[alive], s=60, c=list(face[alive]), edgecolors="black", linewidths=0.6, zorder=3)
        ax.scatter(x[~alive], y[~alive], s=60, facecolors="white", edgecolors="0.6", linewidths=0.8, zorder=3)
        for k, label in enumerate(net.labels[layer]):
            if label:
                ha, off = ("right", -0.35) if layer == 0 else ("left", 0.35)
                ax.text(layer * dx + off, y[k], label, ha=ha, va="center", fontsize=fontsize, zorder=4)
    span = max(max(net.sizes) - 1, 1)
    ax.set_xlim(-1.2, (n_layers - 1) * dx + 1.2)
    bulge = 0.22 * span * max(n_layers - 3, 0) / 2 + 0.1 * span if n_layers > 2 else 0
    ax.set_ylim(-span / 2 - 0.8 - bulge, span / 2 + 0.8 + bulge)
    ax.set_xticks([layer * dx for layer in range(n_layers)])
    ax.set_xticklabels(["inputs"] + [f"hidden {k + 1}" for k in range(n_layers - 2)] + ["outputs"],
                       fontsize="small")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(subtitle, fontsize="small")


def draw_run(path: Path, out: Path, generation: int | None = None, individual: int | None = None,
             activity: bool = True, width: int | None = None, height: int | None = None, dpi: int = 100,
             log=print) -> dict:
    """Draw the champion (or ``--generation/--individual``) of an evolution run into ``out``."""
    out = Path(out)
    suffix = check_image_out(out, (".png", ".svg"))
    if dpi < 10:
        raise UsageError(f"--dpi must be >= 10, got {dpi}")
    if run_kind(path) != "evolve":
        raise UsageError(f"{str(path)!r} is a PPO run: draw shows evolved (pruned) networks; "
                         f"a PPO policy is a dense MLP")
    Figure = matplotlib_figure("draw")
    pick = pick_genome(path, generation, individual)
    net = network(pick.agent, pick.genome)
    n_edges, total = len(net.weight), pick.agent.n_params
    panels = [(np.abs(net.weight), "edge width: |weight|   colour: sign (red +, blue -)")]
    if activity and getattr(pick.agent, "name", "") == "hebbian-dag":
        stats, ret, steps = hebbian_activity(pick)
        if stats is not None:
            panels.append((np.sqrt(np.abs(np.asarray(stats)[net.index])),
                           f"edge width: Hebbian activity, sqrt of mean |trace|\n"
                           f"(one test episode: return {ret:.1f}, {steps} steps)"))
    width = width or 720 * len(panels)
    height = height or 600
    if width < 100 or height < 100:
        raise UsageError(f"--width and --height must be >= 100 pixels, got {width}x{height}")
    fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (strength, subtitle) in zip(axes, panels):
        _panel(ax, net, strength, subtitle)
    cfg = pick.config
    fig.suptitle(f"{cfg.env}: {cfg.agent} {list(cfg.hidden)}, {pick.what}\n"
                 f"{n_edges} surviving connections of {total}", fontsize="medium")
    write_output(out, lambda path: fig.savefig(path, format=suffix[1:], dpi=dpi))
    log(f"draw: {pick.what}: {n_edges} of {total} connections -> {out}")
    return {"connections": n_edges, "n_params": total, "panels": len(panels)}
