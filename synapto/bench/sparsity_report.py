"""The report of ``synapto bench sparsity`` (:mod:`synapto.bench.sparsity`): its runs
summarised per mode (:func:`summarise`), the Pareto front of the modes (:func:`pareto`:
no other mode has as few connections and a higher mean), ``sparsity.md``
(:func:`render_markdown`) and ``sparsity.png`` (:func:`plot`: test return against
connections, one panel per environment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from synapto.bench.common import md_table, mean_std, pyplot
from synapto.bench.learn import SOLVED

#: connection counts marked on the plot's log axis
TICKS = (5, 10, 20, 30, 50, 100, 200, 300, 500, 1000, 2000, 3000)


def summarise(runs: list[dict], threshold: float | None) -> list[dict]:
    """One row per (env, mode): means over seeds, the worst seed, seeds solved."""
    out = []
    for env, mode in dict.fromkeys((r["env"], r["mode"]) for r in runs):
        items = [r for r in runs if r["env"] == env and r["mode"] == mode]
        tm = [r["test_mean"] for r in items]
        thr = SOLVED.get(env) if threshold is None else threshold
        out.append(
            {
                "env": env,
                "mode": mode,
                "agent": items[0]["agent"],
                "level": items[0]["level"],
                "seeds": len(items),
                "test_mean": mean_std(tm),
                "test_median": float(np.median(tm)),
                "min_test": float(min(tm)),
                "solved": None if thr is None else int(sum(t >= thr for t in tm)),
                "connections": mean_std([r["connections"] for r in items]),
                "max_connections": int(max(r["connections"] for r in items)),
                "dense": items[0]["dense"],
                "env_steps": mean_std([r["env_steps"] for r in items]),
                "max_env_steps": int(max(r["env_steps"] for r in items)),
                "wall": mean_std([r["wall"] for r in items]),
            }
        )
    return out


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (connections, return) no other point dominates (as few or
    fewer connections and a higher return, or fewer connections and as high a return),
    by connections."""
    keep = []
    for i, (c, r) in enumerate(points):
        if not any((c2 <= c and r2 > r) or (c2 < c and r2 >= r) for j, (c2, r2) in enumerate(points) if j != i):
            keep.append(i)
    return sorted(keep, key=lambda i: points[i][0])


def render_markdown(meta: dict, summary: list[dict], runs: list[dict]) -> str:
    parts = [f"# bench sparsity: {meta['workers']} worker(s), {meta['test_episodes']} test episodes per champion"]
    for env in dict.fromkeys(s["env"] for s in summary):
        parts.append(
            f"## {env}: seeds {' '.join(map(str, meta['seeds'][env]))}, "
            f"{meta['max_env_steps'][env] / 1e6:g} M training + validation env steps"
        )
        parts.append(_modes_table([s for s in summary if s["env"] == env], SOLVED.get(env)))
        parts.append(
            md_table(
                ["mode", "seed", "test", "connections", "generations", "env steps", "wall"],
                [
                    [
                        r["mode"],
                        r["seed"],
                        f"{r['test_mean']:.1f} ± {r['test_std']:.1f}",
                        r["connections"],
                        r["generations"],
                        f"{r['env_steps'] / 1e6:.2f} M",
                        f"{r['wall']:.0f} s",
                    ]
                    for r in runs
                    if r["env"] == env
                ],
            )
        )
        parts.append(
            "modes (`python -m synapto evolve ...`, plus `--seed S --out F.h5`):\n\n"
            + "\n".join(f"- {m}: `{c}`" for m, c in meta["commands"][env].items())
        )
    parts.append(
        "test: the champion's mean return over the test episodes (the TEST stream); env steps: training "
        "+ validation + selection (the test apart); Pareto: no other mode has as few connections "
        "(mean over seeds) and a higher mean test return."
    )
    return "\n\n".join(parts) + "\n"


def _modes_table(rows: list[dict], thr: float | None) -> str:
    """One environment's modes (its ``summary`` rows), solved against ``thr``, with the Pareto front."""
    front = {rows[i]["mode"] for i in pareto([(s["connections"][0], s["test_mean"][0]) for s in rows])}
    solved = f"solved (>= {thr:g})" if thr else "solved"
    header = ["mode", "test mean", "median", "worst seed", solved, "connections (of dense)", "env steps", "wall time"]
    return md_table(
        [*header, "Pareto"],
        [
            [
                s["mode"],
                f"{s['test_mean'][0]:.1f} ± {s['test_mean'][1]:.1f}",
                f"{s['test_median']:.1f}",
                f"{s['min_test']:.1f}",
                "-" if s["solved"] is None else f"{s['solved']}/{s['seeds']}",
                f"{s['connections'][0]:.0f} (max {s['max_connections']}) of {s['dense']}",
                f"{s['env_steps'][0] / 1e6:.2f} M (max {s['max_env_steps'] / 1e6:.2f} M)",
                f"{s['wall'][0]:.0f} s",
                "yes" if s["mode"] in front else "",
            ]
            for s in rows
        ],
    )


def plot(path: Path, summary: list[dict], runs: list[dict]) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    envs = list(dict.fromkeys(s["env"] for s in summary))
    fig, axes = plt.subplots(1, len(envs), figsize=(6.2 * len(envs), 4.4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        _panel(ax, env, [s for s in summary if s["env"] == env], [r for r in runs if r["env"] == env])
    labels: dict[str, Any] = {}  # one legend for all panels, below them: it never covers a point
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            labels.setdefault(label, handle)
    fig.tight_layout()
    fig.legend(
        list(labels.values()),
        list(labels.keys()),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=4,
        fontsize="small",
        frameon=False,
    )
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return True


def _panel(ax, env: str, rows: list[dict], runs: list[dict]) -> None:
    """The plot of one environment: its runs, its modes' means and their Pareto front."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    colours = {"pruned-mlp": "C0", "hebbian-dag": "C1", "reference": "C3"}
    markers = {"off": "s", "50": "o", "25": "^", "10": "v", "": "X"}
    for s in rows:
        mine = [r for r in runs if r["mode"] == s["mode"]]
        c, m = colours.get(s["agent"], "C7"), markers.get(s["level"], "o")
        ax.scatter(
            [r["connections"] for r in mine], [r["test_mean"] for r in mine], color=c, marker=m, alpha=0.35, s=22
        )
        ax.scatter(
            [s["connections"][0]],
            [s["test_mean"][0]],
            color=c,
            marker=m,
            s=90,
            edgecolors="black",
            label=s["mode"],
            zorder=3,
        )
    front = pareto([(s["connections"][0], s["test_mean"][0]) for s in rows])
    xs = [rows[i]["connections"][0] for i in front]
    ys = [rows[i]["test_mean"][0] for i in front]
    ax.step(xs, ys, where="post", color="black", lw=1, ls=":", label="Pareto front (mode means)")
    if SOLVED.get(env) is not None:
        ax.axhline(SOLVED[env], color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    conns = [r["connections"] for r in runs]
    ax.set_xticks([t for t in TICKS if min(conns) / 1.5 <= t <= max(conns) * 1.5])
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("champion's connections (log scale)")
    ax.set_ylabel("champion's test mean return")
    ax.set_title(env)
