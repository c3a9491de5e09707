"""Does evolution learn something that holds up on fresh episodes? ``make bench-learn``.

Runs two modes of the same budget for several seeds and compares the champions on
100 test episodes (the TEST seed stream, never seen during evolution):

* ``reference`` -- the reference algorithm: every individual gets its own training
  episodes, the champion is the best *training* fitness, pure pruning
  (``--no-crn --validate-episodes 0 --mutation-std 0``);
* ``default``   -- synapto's defaults: common random numbers, champions chosen on
  fresh validation episodes, Gaussian weight mutation beside pruning.

Per mode: the champion's test mean (mean +- std over seeds), the gap between the
fitness the champion was chosen on (training, or validation) and its test mean,
how many seeds reach the task's "solved" threshold, env steps (training +
validation + test) and wall time.  Results: ``<out_dir>/learn.md`` and
``learn.json``, a plot when matplotlib is installed; run files in
``<out_dir>/learn_runs/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

from synapto.bench.common import fmt_mean_std, md_table, mean_std
from synapto.errors import UsageError

MODES = {
    "reference": ["--no-crn", "--validate-episodes", "0", "--mutation-std", "0"],
    "default": [],
}
SOLVED = {"LunarLander-v3": 200.0, "BipedalWalker-v3": 300.0, "CartPole-v1": 475.0}
BUDGETS = {
    # LunarLander: finishes in well under 30 minutes on 2 cores (2 modes x 3 seeds).
    "short": dict(env="LunarLander-v3", population=64, generations=40, episodes=4, hidden=(8, 8)),
    # BipedalWalker (--long): hours on 2 cores; meant for a bigger machine.
    "long": dict(env="BipedalWalker-v3", population=128, generations=200, episodes=4, hidden=(8, 8)),
}


def champion_summary(path: Path) -> dict:
    """What one finished run says about its champion."""
    from synapto.config import EvolveConfig
    from synapto.store import RunData

    with RunData(path, kind="evolve") as run:
        cfg = EvolveConfig.from_json(run.config_json)
        champion = run.champion()
        g, genome = champion.generation, champion.genome
        pop = run.population(g)
        i = int(np.flatnonzero(np.all(pop == genome, axis=1))[0])
        train = float(run.fitness(g, i))
        chosen_on = champion.fitness
        test = champion.test_returns
        steps = int(run.stats("env_steps")[-1]) + int(run.stats("validation_env_steps")[-1]) \
            + int(champion.test_steps.sum())
        wall = float(run.timing("wall").sum())
    return {"seed": cfg.seed, "generation": g, "individual": i, "train_fitness": train,
            "selection_fitness": chosen_on, "validated": cfg.validate_episodes > 0,
            "test_mean": float(test.mean()), "test_std": float(test.std()), "test_episodes": int(test.size),
            "env_steps": steps, "run_wall": wall}


def summarise(runs: dict[str, list[dict]], threshold: float | None) -> dict[str, dict]:
    out = {}
    for mode, items in runs.items():
        tm = [r["test_mean"] for r in items]
        out[mode] = {
            "test_mean": mean_std(tm),
            "train_gap": mean_std([r["train_fitness"] - r["test_mean"] for r in items]),
            "selection_gap": mean_std([r["selection_fitness"] - r["test_mean"] for r in items]),
            "solved": None if threshold is None else sum(t >= threshold for t in tm),
            "seeds": len(items),
            "env_steps": mean_std([r["env_steps"] for r in items]),
            "wall": mean_std([r["wall"] for r in items]),
        }
    return out


def render_markdown(meta: dict, summary: dict, runs: dict) -> str:
    thr = meta["threshold"]
    rows = []
    for mode, s in summary.items():
        rows.append([mode, f"{s['test_mean'][0]:.1f} ± {s['test_mean'][1]:.1f}",
                     f"{s['train_gap'][0]:+.1f}", f"{s['selection_gap'][0]:+.1f}",
                     "-" if s["solved"] is None else f"{s['solved']}/{s['seeds']}",
                     f"{s['env_steps'][0] / 1e6:.2f} M", fmt_mean_std(runs_wall(runs[mode]), 0) + " s"])
    per_seed = [[mode, r["seed"], f"{r['train_fitness']:.1f}", f"{r['selection_fitness']:.1f}",
                 f"{r['test_mean']:.1f} ± {r['test_std']:.1f}", r["generation"]]
                for mode, items in runs.items() for r in items]
    return "\n\n".join([
        f"# bench learn: {meta['env']}, {meta['agent']} {meta['hidden']}, population {meta['population']}, "
        f"{meta['generations']} generations, {meta['episodes']} episodes, {meta['workers']} worker(s)",
        md_table(["mode", f"test mean ({meta['test_episodes']} ep.)", "train - test", "chosen-on - test",
                  f"solved (>= {thr})" if thr is not None else "solved", "env steps", "wall time"], rows),
        "train - test: the champion's training fitness minus its test mean; chosen-on - test: the "
        "fitness it was chosen on (training for `reference`, validation for `default`) minus its test mean.",
        md_table(["mode", "seed", "train fitness", "chosen on", "test", "generation"], per_seed),
        "modes: " + "; ".join(f"`{m}`: `{' '.join(a) or '(defaults)'}`" for m, a in MODES.items()),
    ]) + "\n"


def runs_wall(items):
    return [r["wall"] for r in items]


def plot(path: Path, summary: dict, runs: dict, meta: dict) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for x, (mode, items) in enumerate(runs.items()):
        tm = [r["test_mean"] for r in items]
        ax.bar(x, np.mean(tm), color="#9ecae1", width=0.6)
        ax.scatter([x] * len(tm), tm, color="#08519c", zorder=3)
    if meta["threshold"] is not None:
        ax.axhline(meta["threshold"], color="grey", ls="--", lw=1, label="solved")
        ax.legend()
    ax.set_xticks(range(len(runs)), list(runs))
    ax.set_ylabel(f"champion test mean ({meta['test_episodes']} episodes)")
    ax.set_title(f"{meta['env']}: champions on fresh episodes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("learn")
    def bench_learn(
        long: Annotated[bool, typer.Option("--long", help="BipedalWalker-v3 with a long budget (hours).")] = False,
        env: Annotated[Optional[str], typer.Option(help="Override the budget's environment.")] = None,
        agent: Annotated[str, typer.Option(help="Agent.")] = "hebbian-dag",
        population: Annotated[Optional[int], typer.Option(help="Override the budget's population.")] = None,
        generations: Annotated[Optional[int], typer.Option(help="Override the budget's generations.")] = None,
        episodes: Annotated[Optional[int], typer.Option(help="Override episodes per fitness.")] = None,
        hidden: Annotated[Optional[list[int]], typer.Option(help="Override hidden sizes.")] = None,
        seed: Annotated[Optional[list[int]], typer.Option(help="Seeds. [default: 1 2 3]")] = None,
        test_episodes: Annotated[int, typer.Option(help="Test episodes per champion.")] = 100,
        workers: Annotated[int, typer.Option(help="Workers per run (mpiexec -n N+1).")] = 2,
        mode: Annotated[Optional[list[str]], typer.Option(help="Modes to run. [default: reference default]")]
            = None,
        extra: Annotated[str, typer.Option(help="Extra evolve options for the default mode, e.g. "
                                                "'--mutation-std 0.05'.")] = "",
        out_dir: Annotated[Path, typer.Option(help="Where tables and run files go.")] = Path("bench"),
    ):
        """Reference vs default evolution: champions' returns on 100 fresh test episodes."""
        budget = dict(BUDGETS["long" if long else "short"])
        for k, v in dict(env=env, population=population, generations=generations, episodes=episodes,
                         hidden=tuple(hidden) if hidden else None).items():
            if v is not None:
                budget[k] = v
        seeds = list(seed) if seed else [1, 2, 3]
        modes = list(mode) if mode else list(MODES)
        unknown = [m for m in modes if m not in MODES]
        if unknown:
            raise UsageError(f"--mode {unknown[0]!r} is unknown: expected one of {', '.join(MODES)}")
        if workers < 0:
            raise UsageError(f"--workers must be >= 0, got {workers}")
        run_dir = out_dir / "learn_runs"
        run_dir.mkdir(parents=True, exist_ok=True)
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for m in modes:
            for s in seeds:
                out = run_dir / f"{budget['env']}_{agent.split(':')[-1]}_{m}_s{s}.h5"
                cmd = [sys.executable, "-m", "synapto", "evolve", "--env", budget["env"], "--agent", agent,
                       "--population", str(budget["population"]), "--generations", str(budget["generations"]),
                       "--episodes", str(budget["episodes"]), "--hidden", *map(str, budget["hidden"]),
                       "--seed", str(s), "--test-episodes", str(test_episodes), "--out", str(out), "--force",
                       "--workers", str(workers), *MODES[m], *(extra.split() if m == "default" else [])]
                print(f"[{m} seed {s}] {' '.join(cmd[1:])}", flush=True)
                t = time.perf_counter()
                log = out.with_suffix(".log")
                with open(log, "w") as logf:
                    proc = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT)
                if proc.returncode != 0:
                    tail = "".join(log.read_text().splitlines(keepends=True)[-10:])
                    raise UsageError(f"run failed (exit {proc.returncode}), see {log}:\n{tail}")
                r = champion_summary(out)
                r["wall"] = time.perf_counter() - t
                runs[m].append(r)
                print(f"    champion test {r['test_mean']:.1f} +/- {r['test_std']:.1f} (train "
                      f"{r['train_fitness']:.1f}, chosen on {r['selection_fitness']:.1f}), "
                      f"{r['wall']:.0f} s", flush=True)
        meta = {**budget, "hidden": list(budget["hidden"]), "agent": agent, "seeds": seeds, "workers": workers,
                "test_episodes": test_episodes, "threshold": SOLVED.get(budget["env"]), "extra": extra}
        summary = summarise(runs, meta["threshold"])
        md = render_markdown(meta, summary, runs)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "learn.md").write_text(md)
        (out_dir / "learn.json").write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs},
                                                       indent=2))
        plotted = plot(out_dir / "learn.png", summary, runs, meta)
        print(md)
        print(f"wrote {out_dir / 'learn.md'}, {out_dir / 'learn.json'}" + (", learn.png" if plotted else ""))
