"""How few connections does a solving network need? ``python -m synapto bench sparsity``.

For each environment (LunarLander-v3, BipedalWalker-v3) and agent (pruned-mlp,
hebbian-dag), the shipped setting runs with pruning off and with a target of 50 %,
25 % and 10 % of the dense network's connections (``prune_to``; the schedule and the
criterion are the setting's own), beside the reference algorithm (the GA of pure
synaptolysis on hebbian-dag, champion chosen on training fitness).  Per run: the
champion's mean over the test episodes (the TEST stream), its connections, the env
steps (training + validation + selection) and the wall time.  Results:
``<out_dir>/sparsity.md`` and ``sparsity.json`` (rewritten after every run), and
``sparsity.png``: test return against connections, one panel per environment, with
the Pareto front of the modes (no other mode has as few connections and a higher
mean).  Run files and logs go to ``<out_dir>/sparsity_runs/``; ``--keep-finished``
reuses the finished ones there (an interrupted benchmark continues where it stopped).
The report is made by :mod:`synapto.bench.sparsity_report`.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import typer

from synapto.bench.common import SEEDS, TEST_EPISODES, WORKERS, evolve_command, run_logged
from synapto.bench.sparsity_report import plot
from synapto.common import declare
from synapto.common.declare import Request, multi_value_flags, opt
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir

#: pruning levels: the target fraction of the dense network's connections (None: pruning off)
LEVELS = {"off": None, "50": 0.5, "25": 0.25, "10": 0.1}
AGENTS = ("pruned-mlp", "hebbian-dag")


@dataclass(frozen=True)
class Setting:
    """One environment's budget and the options of each agent's runs."""

    env: str
    max_env_steps: int  #: training + validation env steps per run (the final selection on top)
    configs: dict  #: agent -> the shipped config its runs start from
    reference: list  #: evolve options of the reference algorithm (no config)


def _reference(population: int, episodes: int) -> list[str]:
    """The reference algorithm's evolve options: the GA of pure synaptolysis on a hebbian-dag."""
    ga = ["--strategy", "ga", "--agent", "hebbian-dag", "--hidden", "8", "8", "--no-crn"]
    counts = ["--population", str(population), "--episodes", str(episodes)]
    return [*ga[:7], *counts, *ga[7:], "--validate-episodes", "0", "--mutation-std", "0", "--select-episodes", "0"]


SETTINGS = {
    # 2.75 M training + validation steps leave room for the final selection within 3 M.
    "LunarLander-v3": Setting(
        "LunarLander-v3",
        2_750_000,
        {"pruned-mlp": "experiments/lunarlander_sparse.toml", "hebbian-dag": "experiments/lunarlander_hebbian.toml"},
        _reference(64, 4),
    ),
    # the shaped configs that walk within 10 M env steps (docs/results.md), each cut to a level
    "BipedalWalker-v3": Setting(
        "BipedalWalker-v3",
        10_000_000,
        {"pruned-mlp": "experiments/bipedal_fast.toml", "hebbian-dag": "experiments/bipedal_hebbian.toml"},
        _reference(138, 8),
    ),
}


def mode_name(agent: str, level: str) -> str:
    return f"{agent} {'dense' if level == 'off' else level + ' %'}"


def mode_args(setting: Setting, agent: str, level: str, root: Path) -> list[str]:
    """The evolve options of one mode (``agent`` ``reference``: the reference algorithm)."""
    if agent == "reference":
        return list(setting.reference)
    args = ["--config", str(root / setting.configs[agent])]
    fraction = LEVELS[level]
    if fraction is None:
        return [*args, "--prune", "off", "--strategy-option", "prune_to=0"]
    return [*args, "--prune", "on", "--strategy-option", f"prune_to={fraction}"]


def command(
    setting: Setting,
    agent: str,
    level: str,
    seed: int,
    out: Path,
    workers: int,
    test_episodes: int,
    max_env_steps: int | None,
    root: Path,
) -> list[str]:

    args = ["--env", setting.env, *mode_args(setting, agent, level, root)]
    args += ["--max-env-steps", str(max_env_steps or setting.max_env_steps), "--generations", "100000"]
    return evolve_command(*args, seed=seed, test_episodes=test_episodes, out=out, workers=workers)


def finished(path: Path, test_episodes: int) -> bool:
    """A run file whose champion was tested on ``test_episodes`` episodes."""
    from synapto.store import RunData

    if not path.exists():
        return False
    try:
        with RunData(path, kind="evolve") as run:
            return bool(run.tested) and run.champion().test_returns.size == test_episodes
    except Exception:  # unreadable or unfinished: run it again
        return False


def identity(cmd: Sequence[str]) -> str:
    """What makes a run of :func:`command` the run it is: its options apart from the
    interpreter and ``--workers`` (the last two), on which no result depends."""
    return shlex.join(cmd[1:-2])


def resumable(path: Path, cmd: Sequence[str]) -> bool:
    """An unfinished run file that ``cmd``'s run started (its ``.cmd`` file holds
    :func:`identity`) and that has a checkpoint to go on from."""
    marker = path.with_suffix(".cmd")
    return path.exists() and Path(f"{path}.ckpt").exists() and marker.exists() and marker.read_text() == identity(cmd)


def dense_connections(path: Path) -> int:
    """The genome length of a run: its network's connections before any pruning."""
    from synapto.store import RunData

    with RunData(path, kind="evolve") as run:
        return int(run.champion().genome.size)


@dataclass(frozen=True)
class SparsityOptions:
    """``synapto bench sparsity``'s options."""

    envs: list[str] | None = opt(None, help="Environments.", show_default="LunarLander-v3 BipedalWalker-v3", multi=True)
    agents: list[str] | None = opt(None, help="Agents.", show_default="pruned-mlp hebbian-dag", multi=True)
    levels: list[str] | None = opt(
        None, help="Pruning levels: off, 50, 25, 10 (% of the dense connections).", show_default="all", multi=True
    )
    reference: bool = opt(True, flags=("--reference/--no-reference",), help="Add the reference algorithm's row.")
    seed: list[int] | None = opt(None, **SEEDS)
    bipedal_seeds: list[int] | None = opt(
        None, help="Seeds of the BipedalWalker-v3 runs (10 M env steps each).", show_default="1", multi=True
    )
    max_env_steps: int | None = opt(
        None,
        help="Override the LunarLander-v3 budget (training + validation env steps per run).",
        show_default="each config's",
    )
    bipedal_steps: int | None = opt(None, help="Override the BipedalWalker-v3 budget.", show_default="10000000")
    test_episodes: int = opt(100, **TEST_EPISODES)
    workers: int = opt(2, **WORKERS)
    keep_finished: bool = opt(
        False,
        help="Reuse finished run files in OUT_DIR/sparsity_runs, and resume stopped ones from their "
        "checkpoints, instead of running them again.",
    )
    out_dir: Path = opt(Path("bench"), help="Where tables, plot and run files go.")


#: options taking several values (``--levels off 50``), rewritten by synapto.cli
MULTI_VALUE_OPTIONS = multi_value_flags(SparsityOptions)


def register(bench_app: typer.Typer) -> None:
    bench_app.command("sparsity")(declare.command(bench_sparsity, SparsityOptions))


def bench_sparsity(request: Request) -> None:
    """Pruning levels side by side: test return against connections, with the Pareto front."""
    from synapto.bench.learn import check_command

    o = request.build(SparsityOptions)
    envs, agents, levels = _checked_modes(o.envs, o.agents, o.levels)
    _check_numbers(o.workers, o.max_env_steps, o.bipedal_steps, o.test_episodes)
    check_out_dir(o.out_dir)
    bipedal = "BipedalWalker-v3"
    seeds = {e: list(o.bipedal_seeds or [1]) if e == bipedal else list(o.seed or [1, 2, 3, 4, 5]) for e in envs}
    steps = {e: (o.bipedal_steps if e == bipedal else o.max_env_steps) or SETTINGS[e].max_env_steps for e in envs}
    modes = [(e, a, lv) for e in envs for a in agents for lv in levels]
    modes += [(e, "reference", "") for e in envs] if o.reference else []
    plan = Plan(modes, seeds, steps, o.workers, o.test_episodes, o.out_dir / "sparsity_runs")
    for e, a, lv in plan.modes:  # every mode's options checked before the first run
        check_command(plan.command(e, a, lv, seeds[e][0])[0])
    run_plan(plan, o.out_dir, o.keep_finished)


def _checked_modes(envs, agents, levels) -> tuple[list[str], list[str], list[str]]:
    """The environments, agents and pruning levels asked for (all by default), each known."""
    envs = list(envs) if envs else list(SETTINGS)
    agents = list(agents) if agents else list(AGENTS)
    levels = list(levels) if levels else list(LEVELS)
    for name, given, known in (("--envs", envs, SETTINGS), ("--agents", agents, AGENTS), ("--levels", levels, LEVELS)):
        bad = [g for g in given if g not in known]
        if bad:
            raise UsageError(f"{name} {bad[0]!r} is unknown: expected one of {', '.join(known)}")
    return envs, agents, levels


def _check_numbers(workers: int, max_env_steps: int | None, bipedal_steps: int | None, test_episodes: int) -> None:
    if workers < 0:
        raise UsageError(f"--workers must be >= 0, got {workers}")
    for name, v in (("--max-env-steps", max_env_steps), ("--bipedal-steps", bipedal_steps)):
        if v is not None and v < 1:
            raise UsageError(f"{name} must be >= 1, got {v}")
    if test_episodes < 1:
        raise UsageError(f"--test-episodes must be >= 1, got {test_episodes}")


@dataclass
class Plan:
    """The benchmark's runs: ``(env, agent, level)`` modes, each at its env's seeds and budget."""

    modes: list  #: (env, agent, level); agent "reference" with level "" for the reference's row
    seeds: dict  #: env -> seeds
    steps: dict  #: env -> training + validation env steps per run
    workers: int
    test_episodes: int
    run_dir: Path  #: where the run files (and their .log and .cmd files) go

    def command(self, e: str, a: str, lv: str, s: int) -> tuple[list[str], Path]:
        """The command of mode ``(e, a, lv)`` at seed ``s``, and its run file."""
        out = self.run_dir / f"{e}_{a}_{lv or 'ref'}_s{s}.h5"
        root = Path(__file__).resolve().parents[2]
        return command(SETTINGS[e], a, lv, s, out, self.workers, self.test_episodes, self.steps[e], root), out

    def meta(self) -> dict:
        """What the report says of the plan: seeds, budgets, workers, test episodes, each mode's options."""
        envs = list(self.seeds)
        return {
            "seeds": self.seeds,
            "max_env_steps": self.steps,
            "workers": self.workers,
            "test_episodes": self.test_episodes,
            "commands": {
                e: {
                    ("reference" if a == "reference" else mode_name(a, lv)): shlex.join(
                        mode_args(SETTINGS[e], a, lv, Path("."))
                    )
                    for e2, a, lv in self.modes
                    if e2 == e
                }
                for e in envs
            },
        }


def run_plan(plan: Plan, out_dir: Path, keep_finished: bool) -> None:
    """Every run of ``plan`` in turn; the report, its JSON and plot rewritten after each."""
    from synapto.bench.sparsity_report import render_markdown, summarise

    plan.run_dir.mkdir(parents=True, exist_ok=True)
    meta = plan.meta()
    runs: list[dict] = []
    for e, a, lv in plan.modes:
        for s in plan.seeds[e]:
            r = _run_mode(plan, e, a, lv, s, keep_finished)
            runs.append(r)
            print(
                f"    champion test {r['test_mean']:.1f} +/- {r['test_std']:.1f}, {r['connections']} "
                f"connections, {r['env_steps']:,} env steps, {r['wall']:.0f} s",
                flush=True,
            )
            summary = summarise(runs, None)
            (out_dir / "sparsity.md").write_text(render_markdown(meta, summary, runs))
            (out_dir / "sparsity.json").write_text(
                json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=2)
            )
            plot(out_dir / "sparsity.png", summary, runs)
    print((out_dir / "sparsity.md").read_text())
    print(f"wrote {out_dir / 'sparsity.md'}, {out_dir / 'sparsity.json'}, {out_dir / 'sparsity.png'}")


def _run_mode(plan: Plan, e: str, a: str, lv: str, s: int, keep_finished: bool) -> dict:
    """One run's champion summary: a finished run file reused, a stopped one resumed (with
    ``keep_finished``), else the run made."""
    from synapto.bench.learn import champion_summary

    cmd, out = plan.command(e, a, lv, s)
    mode = "reference" if a == "reference" else mode_name(a, lv)
    if keep_finished and finished(out, plan.test_episodes):
        print(f"[{e} {mode} seed {s}] reusing {out}", flush=True)
        r = champion_summary(out)
        r["wall"] = r["run_wall"]
    elif keep_finished and resumable(out, cmd):  # stopped or killed: go on from its checkpoint
        print(f"[{e} {mode} seed {s}] resuming {out}", flush=True)
        run_logged(
            [sys.executable, "-m", "synapto", "evolve", "--resume", str(out), "--workers", str(plan.workers)],
            out.with_suffix(".log"),
            append=True,
        )
        r = champion_summary(out)
        r["wall"] = r["run_wall"]
    else:
        print(f"[{e} {mode} seed {s}] {shlex.join(cmd[1:])}", flush=True)
        out.with_suffix(".cmd").write_text(identity(cmd))
        wall = run_logged(cmd, out.with_suffix(".log")).wall
        r = champion_summary(out)
        r["wall"] = wall
    r.update(env=e, agent=a, level=lv, mode=mode, dense=dense_connections(out))
    return r
