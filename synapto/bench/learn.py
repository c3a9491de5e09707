"""Which strategy finds champions that hold up on fresh episodes? ``make bench-learn``.

Runs every mode on the same env-step budget for several seeds and compares the
champions on 100 test episodes (the TEST seed stream, never seen during evolution).
The LunarLander-v3 modes (``--long``: BipedalWalker-v3, hours):

* ``reference`` -- the reference algorithm: the GA on a hebbian-dag, every individual
  on its own training episodes, the champion the best *training* fitness, pure pruning;
* ``ga``        -- the GA with common random numbers, validation and weight mutation;
* ``openai-es``, ``pgpe``, ``cmaes`` -- the centre strategies on a pruned-mlp with the
  settings of ``experiments/lunarlander_learn.toml`` (openai-es is that config).

Every mode but ``reference`` chooses its champion among its final candidates on fresh
selection episodes.  Per mode and seed: the champion's test mean, the fitness it was
chosen on, env steps (training + validation + selection; the test is counted apart)
and wall time.  Results: ``<out_dir>/learn.md`` and ``learn.json`` (rewritten after
every run, so an interrupted benchmark keeps what it measured), a plot when matplotlib
is installed; run files in ``<out_dir>/learn_runs/``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import typer

from synapto.bench.common import SEEDS, TEST_EPISODES, WORKERS, evolve_command, md_table, mean_std, pyplot, run_logged
from synapto.common import declare
from synapto.common.declare import Request, opt
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir

SOLVED = {"LunarLander-v3": 200.0, "BipedalWalker-v3": 300.0, "CartPole-v1": 475.0}

_GA = ["--strategy", "ga", "--agent", "hebbian-dag", "--hidden", "8", "8", "--population", "64", "--episodes", "4"]
_CENTRE = ["--agent", "pruned-mlp", "--hidden", "16", "--population", "64", "--episodes", "1", "--validate-top", "2"]
_CENTRE += ["--validate-episodes", "8", "--sigma", "0.1", "--prune", "off"]


@dataclass(frozen=True)
class Budget:
    env: str
    max_env_steps: int  #: training + validation env steps; the run ends after the generation reaching it
    select_episodes: int
    modes: dict[str, list[str]] = field(default_factory=dict)  #: mode -> evolve options


BUDGETS = {
    # 2.75 M training + validation steps leave room for the final selection (at most
    # 5 candidates x 30 episodes x 1000 steps) within 3 M env steps per run.
    "short": Budget(
        "LunarLander-v3",
        2_750_000,
        30,
        {
            "reference": [*_GA, "--no-crn", "--validate-episodes", "0", "--mutation-std", "0"],
            "ga": [*_GA, "--validate-episodes", "16", "--mutation-std", "0.5"],
            "openai-es": ["--strategy", "openai-es", *_CENTRE, "--lr", "0.03"],
            "pgpe": ["--strategy", "pgpe", *_CENTRE, "--strategy-option", "max_speed=0.15"],
            "cmaes": ["--strategy", "cmaes", *_CENTRE, "--strategy-option", "separable=true"],
        },
    ),
    # experiments/bipedal_solve.toml's settings
    "long": Budget(
        "BipedalWalker-v3",
        60_000_000,
        20,
        {
            "openai-es": [
                *["--strategy", "openai-es", "--agent", "pruned-mlp", "--hidden", "40", "40", "--population", "64"],
                *["--episodes", "1", "--obs-norm", "--validate-top", "2", "--validate-episodes", "4"],
                *["--sigma", "0.05", "--lr", "0.02", "--strategy-option", "prune_every=20"],
            ],
        },
    ),
}


def command(
    budget: Budget,
    mode: str,
    seed: int,
    out: Path,
    workers: int,
    test_episodes: int,
    extra: list[str],
    env: str | None,
    max_env_steps: int | None,
) -> list[str]:
    """The ``synapto evolve`` command line of one run."""

    args = ["--env", env or budget.env, "--max-env-steps", str(max_env_steps or budget.max_env_steps)]
    args += ["--generations", "100000", *budget.modes[mode]]
    args += ["--select-episodes", "0" if mode == "reference" else str(budget.select_episodes)]
    return evolve_command(
        *args, *([] if mode == "reference" else extra), seed=seed, test_episodes=test_episodes, out=out, workers=workers
    )


def champion_summary(path: Path) -> dict:
    """What one finished run says about its champion and its cost."""
    from synapto.evolution.config import EvolveConfig
    from synapto.store import RunData

    with RunData(path, kind="evolve") as run:
        cfg = EvolveConfig.from_json(run.config_json)
        champion = run.champion()
        selection = run.selection()
        test = champion.test_returns
        selection_steps = 0 if selection is None else int(selection.steps.sum())
        train = int(run.stats("env_steps")[-1])
        validation = int(run.stats("validation_env_steps")[-1])
        return {
            "seed": cfg.seed,
            "generations": run.completed,
            "champion_generation": champion.generation,
            "chosen_on": champion.fitness,
            "selection_fitness": champion.selection_fitness,
            "test_mean": float(test.mean()),
            "test_std": float(test.std()),
            "test_episodes": int(test.size),
            "env_steps": train + validation + selection_steps,
            "training_steps": train,
            "validation_steps": validation,
            "selection_steps": selection_steps,
            "test_steps": int(champion.test_steps.sum()),
            "connections": int(np.count_nonzero(champion.genome)),
            "run_wall": float(run.timing("wall").sum()),
        }


def summarise(runs: dict[str, list[dict]], threshold: float | None) -> dict[str, dict]:
    out = {}
    for mode, items in runs.items():
        if not items:
            continue
        tm = [r["test_mean"] for r in items]
        gap = [
            (r["selection_fitness"] if r["selection_fitness"] is not None else r["chosen_on"]) - r["test_mean"]
            for r in items
        ]
        out[mode] = {
            "test_mean": mean_std(tm),
            "min_test": float(min(tm)),
            "chosen_gap": mean_std(gap),
            "solved": None if threshold is None else int(sum(t >= threshold for t in tm)),
            "seeds": len(items),
            "env_steps": mean_std([r["env_steps"] for r in items]),
            "max_env_steps": int(max(r["env_steps"] for r in items)),
            "wall": mean_std([r["wall"] for r in items]),
        }
    return out


def render_markdown(meta: dict, summary: dict, runs: dict) -> str:
    parts = [
        f"# bench learn: {meta['env']}, {meta['max_env_steps'] / 1e6:g} M env-step budget, "
        f"{meta['workers']} worker(s), seeds {' '.join(map(str, meta['seeds']))}",
        _modes_table(meta, summary),
        "chosen-on - test: the fitness the champion was chosen on (selection episodes; training fitness "
        "for `reference`) minus its test mean.  env steps: training + validation + selection "
        "(the test episodes apart).",
        _seeds_table(runs),
        "modes (`python -m synapto evolve ...`):\n\n"
        + "\n".join(f"- `{m}`: `{' '.join(meta['commands'][m])}`" for m in runs),
    ]
    return "\n\n".join(parts) + "\n"


def _modes_table(meta: dict, summary: dict) -> str:
    thr = meta["threshold"]
    header = [
        "mode",
        f"test mean ({meta['test_episodes']} ep.)",
        "worst seed",
        f"solved (>= {thr:g})" if thr is not None else "solved",
        "chosen-on - test",
        "env steps",
        "wall time",
    ]
    rows = [
        [
            m,
            f"{s['test_mean'][0]:.1f} ± {s['test_mean'][1]:.1f}",
            f"{s['min_test']:.1f}",
            "-" if s["solved"] is None else f"{s['solved']}/{s['seeds']}",
            f"{s['chosen_gap'][0]:+.1f}",
            f"{s['env_steps'][0] / 1e6:.2f} M (max {s['max_env_steps'] / 1e6:.2f} M)",
            f"{s['wall'][0]:.0f} s",
        ]
        for m, s in summary.items()
    ]
    return md_table(header, rows)


def _seeds_table(runs: dict) -> str:
    header = ["mode", "seed", "run's champion fitness (-: the final centre)", "selection", "test", "generations"]
    rows = [
        [
            m,
            r["seed"],
            "-" if np.isnan(r["chosen_on"]) else f"{r['chosen_on']:.1f}",
            "-" if r["selection_fitness"] is None else f"{r['selection_fitness']:.1f}",
            f"{r['test_mean']:.1f} ± {r['test_std']:.1f}",
            r["generations"],
            f"{r['env_steps'] / 1e6:.2f} M",
            r["connections"],
            f"{r['wall']:.0f} s",
        ]
        for m, items in runs.items()
        for r in items
    ]
    return md_table([*header, "env steps", "connections", "wall"], rows)


def plot(path: Path, runs: dict, meta: dict) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(runs), 3.5))
    for x, items in enumerate(runs.values()):
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


def check_command(cmd: list[str]) -> None:
    """Refuse a mode whose options ``evolve`` would refuse, before anything runs."""
    proc = subprocess.run([*cmd, "--check"], capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise UsageError(lines[-1] if lines else f"evolve refused {shlex.join(cmd[3:])}")


@dataclass(frozen=True)
class LearnOptions:
    """``synapto bench learn``'s options."""

    long: bool = opt(False, flags=("--long",), help="BipedalWalker-v3 with a 60 M env-step budget (hours per seed).")
    mode: list[str] | None = opt(
        None, help="Modes to run.", show_default="all of the budget's: reference ga openai-es pgpe cmaes"
    )
    seed: list[int] | None = opt(None, **SEEDS)
    env: str | None = opt(None, help="Override the budget's environment.", show_default="the budget's")
    max_env_steps: int | None = opt(
        None, help="Override the budget's training + validation env steps per run.", show_default="the budget's"
    )
    test_episodes: int = opt(100, **TEST_EPISODES)
    workers: int = opt(2, **WORKERS)
    extra: str = opt(
        "", help="Extra evolve options for every mode but reference, e.g. '--obs-norm'.", show_default="none"
    )
    out_dir: Path = opt(Path("bench"), help="Where tables and run files go.")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("learn")(declare.command(bench_learn, LearnOptions))


def bench_learn(request: Request) -> None:
    """Strategies side by side: champions' returns on 100 fresh test episodes, env steps, wall time."""
    o = request.build(LearnOptions)
    budget = BUDGETS["long" if o.long else "short"]
    seeds = list(o.seed) if o.seed else [1, 2, 3, 4, 5]
    modes = list(o.mode) if o.mode else list(budget.modes)
    unknown = [m for m in modes if m not in budget.modes]
    if unknown:
        raise UsageError(f"--mode {unknown[0]!r} is unknown: expected one of {', '.join(budget.modes)}")
    if o.workers < 0:
        raise UsageError(f"--workers must be >= 0, got {o.workers}")
    if o.max_env_steps is not None and o.max_env_steps < 1:
        raise UsageError(f"--max-env-steps must be >= 1, got {o.max_env_steps}")
    check_out_dir(o.out_dir)
    run_dir = o.out_dir / "learn_runs"
    extra_args = shlex.split(o.extra)
    env_name = o.env or budget.env

    def cmd_of(m, s):
        out = run_dir / f"{env_name.replace('/', '_')}_{m}_s{s}.h5"
        return command(budget, m, s, out, o.workers, o.test_episodes, extra_args, o.env, o.max_env_steps), out

    for m in modes:  # every mode's options checked before the first run
        check_command(cmd_of(m, seeds[0])[0])
    run_dir.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "env": env_name,
        "max_env_steps": o.max_env_steps or budget.max_env_steps,
        "seeds": seeds,
        "workers": o.workers,
        "test_episodes": o.test_episodes,
        "threshold": SOLVED.get(env_name),
        "extra": o.extra,
        "commands": {m: cmd_of(m, seeds[0])[0][4:] for m in modes},
    }
    run_modes(modes, seeds, cmd_of, meta, o.out_dir)


def run_modes(modes: list[str], seeds: list[int], cmd_of, meta: dict, out_dir: Path) -> None:
    """Every mode at every seed in turn (``cmd_of(mode, seed)``: its command and run file);
    the report and its JSON rewritten after each run, the plot at the end."""

    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for m in modes:
        for s in seeds:
            cmd, out = cmd_of(m, s)
            print(f"[{m} seed {s}] {shlex.join(cmd[1:])}", flush=True)
            wall = run_logged(cmd, out.with_suffix(".log")).wall
            r = champion_summary(out)
            r["wall"] = wall
            runs[m].append(r)
            print(
                f"    champion test {r['test_mean']:.1f} +/- {r['test_std']:.1f} (selection "
                f"{r['selection_fitness'] if r['selection_fitness'] is not None else '-'}), "
                f"{r['env_steps']:,} env steps, {r['wall']:.0f} s",
                flush=True,
            )
            done = {k: v for k, v in runs.items() if v}
            summary = summarise(done, meta["threshold"])
            md = render_markdown(meta, summary, done)
            (out_dir / "learn.md").write_text(md)
            (out_dir / "learn.json").write_text(json.dumps({"meta": meta, "summary": summary, "runs": done}, indent=2))
    plotted = plot(out_dir / "learn.png", {k: v for k, v in runs.items() if v}, meta)
    print(md)
    print(f"wrote {out_dir / 'learn.md'}, {out_dir / 'learn.json'}" + (", learn.png" if plotted else ""))
