"""``synapto bench compare``: evolution against PPO on the same tasks, from their run files.

Where does evolution's wall-time advantage beat PPO's sample efficiency?  For every run
given (``synapto evolve`` runs of a centre strategy, ``synapto ppo`` runs), the policies
the run checkpointed are tested on fresh episodes of the run's test stream, as its final
test is:

* an evolution run: the centre of ``--points`` generations spread evenly over the run
  (``/strategy/centre``, with the observation normalisation that generation ran with),
  placed at the env steps (training + validation) and wall time spent before that
  generation; then the final champion's stored test, at all the run's env steps
  (selection included) and wall time;
* a PPO run: the parameters kept every ``save_freq`` epochs (``--points`` of them, spread
  evenly), with that epoch's observation normalisation, at the env steps and wall time
  after that epoch; then the final policy's stored test (or, without one, its test here).

A run that is not finished (still going, or stopped) ends at its latest policy instead
(the centre of its last generation, the checkpoint after its last epoch) and is marked
unfinished in the table: its figures are how far it got.

A task's **threshold** (LunarLander-v3 200, BipedalWalker-v3 300, HalfCheetah-v5 2386,
Hopper-v5 3403, Walker2d-v5 3830, Swimmer-v5 355; ``--threshold ENV=X``) is reached at
the first tested point whose mean passes it: its env steps and wall time are the figures
(upper bounds: the true crossing lies between that point and the one before).  Runs of
one config but different seeds form a method; per method and task the tables give the
final test mean over seeds, the seeds that reached the threshold, and the median env
steps and wall time of those that did.  Tests are cached in ``<out-dir>/compare_cache.json``
by run id, point and episodes, so adding runs or rerunning costs only the new tests.

Wall times are those the runs recorded: compare them between runs made on the same
machine under the same load.  Outputs: ``<out-dir>/<name>.md``, ``.json`` and ``.png``
(return against env steps and against wall time, one row per task, both methods).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from synapto.bench.common import md_table, pyplot
from synapto.common.errors import UsageError
from synapto.common.seeding import test_seeds
from synapto.envs import make_env

THRESHOLDS = {
    "LunarLander-v3": 200.0,
    "BipedalWalker-v3": 300.0,
    "HalfCheetah-v5": 2386.0,
    "Hopper-v5": 3403.0,
    "Walker2d-v5": 3830.0,
    "Swimmer-v5": 355.0,
    "CartPole-v1": 475.0,
}


@dataclass
class Point:
    """A tested policy of a run: where it stood and what its test gave."""

    env_steps: int
    wall: float  #: seconds of the run before this policy existed
    label: str  #: "generation 12", "epoch 40", "final"
    test_mean: float
    test_std: float


@dataclass
class Curve:
    """One run's tested points, in order."""

    path: str
    kind: str  #: "evolve" or "ppo"
    env: str
    method: str
    seed: int
    points: list[Point] = field(default_factory=list)
    finished: bool = True  #: False: a run still going (or stopped), its last point its latest policy

    @property
    def final(self) -> Point:
        return self.points[-1]

    def reached(self, threshold: float) -> Point | None:
        """The first point whose test mean is at least ``threshold`` (None: never)."""
        return next((p for p in self.points if p.test_mean >= threshold), None)


def spread(candidates: list[int], k: int) -> list[int]:
    """At most ``k`` of ``candidates`` (sorted), evenly spread, the last one included."""
    if k <= 0 or not candidates:
        return []
    if len(candidates) <= k:
        return list(candidates)
    pick = np.unique(np.round(np.linspace(0, len(candidates) - 1, k)).astype(int))
    return [candidates[i] for i in pick]


class Cache:
    """Test results by run id, point and episodes, kept in a JSON file."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key: str, compute: Callable[[], np.ndarray]) -> tuple[float, float]:
        if key not in self.data:
            returns = np.asarray(compute(), dtype=np.float64)
            self.data[key] = [float(returns.mean()), float(returns.std())]
            self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        mean, std = self.data[key]
        return float(mean), float(std)


# ------------------------------------------------------------------------ evolution
def evolve_method(cfg) -> str:
    hidden = "linear" if not cfg.hidden else "-".join(map(str, cfg.hidden))
    norm = ", obs-norm" if cfg.obs_norm else ""
    return f"{cfg.strategy} {cfg.agent} {hidden}{norm}, population {cfg.population}"


def evolve_curve(path: Path, points: int, episodes: int, cache: Cache, log) -> Curve:
    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig
    from synapto.store import RunData

    with RunData(path, kind="evolve") as run:
        cfg = run.parse_config(EvolveConfig.from_json)
        finished = run.tested
        if "centre" not in run.strategy_names():
            raise UsageError(
                f"{str(path)!r} is a {cfg.strategy} run: bench compare needs a centre strategy's "
                f"checkpointed centres (openai-es, pgpe, cmaes, ars)"
            )
        run_id, g_done = run.run_id, run.completed
        steps = run.stats("env_steps") + run.stats("validation_env_steps")
        wall = np.cumsum(np.nan_to_num(run.timing("wall")))
        picks = spread(list(range(1, g_done)), points)
        if not finished and g_done - 1 not in picks and g_done > 1:
            picks.append(g_done - 1)  # an unfinished run: its latest centre
        centres = {g: (run.strategy("centre", g), run.obs_norm(g)) for g in picks}
        champion = run.champion()
        selection = run.selection()
    agent = build_agent(cfg)
    env = partial(make_env, cfg.env, **cfg.make_kwargs)
    seeds = test_seeds(cfg.seed, episodes)
    curve = Curve(str(path), "evolve", cfg.env, evolve_method(cfg), cfg.seed, finished=finished)
    for g in picks:
        genome, norm = centres[g]
        log(f"  {path.name}: generation {g} centre on {episodes} test episodes")

        def centre_returns(genome: np.ndarray = genome, norm=norm) -> np.ndarray:
            from synapto.evolution.worker.evaluate import evaluate

            return evaluate(agent, env, genome, seeds, want_stats=False, obs_norm=norm).returns

        mean, std = cache.get(f"{run_id}:centre{g}:{episodes}", centre_returns)
        curve.points.append(Point(int(steps[g - 1]), float(wall[g - 1]), f"generation {g}", mean, std))
    if finished:
        total = int(steps[-1]) + (int(np.sum(selection.steps)) if selection is not None else 0)
        r = champion.test_returns
        curve.points.append(Point(total, float(wall[-1]), "final", float(r.mean()), float(r.std())))
    return curve


# ------------------------------------------------------------------------------ PPO
def ppo_method(cfg) -> str:
    extras = [name for name, on in (("obs-norm", cfg.obs_norm), ("reward-scale", cfg.reward_scale)) if on]
    batch = f"minibatches of {cfg.minibatch_size}" if cfg.minibatch_size else "full batch"
    return f"PPO {'-'.join(map(str, cfg.hid))}, {cfg.n_envs} env(s), {batch}" + "".join(f", {e}" for e in extras)


def ppo_curve(path: Path, points: int, episodes: int, cache: Cache, log) -> Curve:
    from synapto.ppo.config import PPOConfig
    from synapto.ppo.evaluate import test_policy
    from synapto.store import PPORun

    with PPORun(path) as run:
        cfg = run.parse_config(PPOConfig.from_json)
        done = run.completed
        finished = done >= cfg.epochs
        if done < 1:
            raise UsageError(f"{str(path)!r} has no completed epoch")
        run_id = run.run_id
        steps = run.stats("TotalEnvInteracts")
        wall = run.timing("Time")
        kept = list(range(0, done - 1, cfg.save_freq))
        picks = spread(kept, points)
        params = {k: (run.params(str(k))[0], run.policy_norm(k)) for k in picks}
        final_params, final_norm, stored = run.params("latest")[0], run.policy_norm(done - 1), run.policy_test()
    curve = Curve(str(path), "ppo", cfg.env, ppo_method(cfg), cfg.seed, finished=finished)
    for k in picks:
        pi, norm = params[k]
        log(f"  {path.name}: epoch {k} policy on {episodes} test episodes")

        def policy_returns(pi: np.ndarray = pi, norm=norm) -> np.ndarray:
            from synapto.ppo.evaluate import test_policy

            return test_policy(cfg, pi, episodes, norm)["returns"]

        mean, std = cache.get(f"{run_id}:epoch{k}:{episodes}", policy_returns)
        curve.points.append(Point(int(steps[k]), float(wall[k]), f"epoch {k}", mean, std))
    if stored is not None:
        mean, std = float(stored["returns"].mean()), float(stored["returns"].std())
    else:
        mean, std = cache.get(
            f"{run_id}:{'final' if finished else f'latest{done}'}:{episodes}",
            lambda: test_policy(cfg, final_params, episodes, final_norm)["returns"],
        )
    curve.points.append(Point(int(steps[-1]), float(wall[-1]), "final" if finished else f"epoch {done - 1}", mean, std))
    return curve


# --------------------------------------------------------------------------- summary
def summarise(curves: list[Curve], thresholds: dict[str, float]) -> list[dict]:
    """One row per (task, method): final test over seeds, seeds reaching the threshold, the
    median env steps and wall time at which they did."""
    rows = []
    for env in sorted({c.env for c in curves}):
        threshold = thresholds.get(env, math.nan)
        for method in sorted({c.method for c in curves if c.env == env}):
            group = sorted((c for c in curves if c.env == env and c.method == method), key=lambda c: c.seed)
            finals = [c.final.test_mean for c in group]
            hits = [c.reached(threshold) for c in group]
            got = [h for h in hits if h is not None]
            rows.append(
                {
                    "env": env,
                    "method": method,
                    "kind": group[0].kind,
                    "threshold": threshold,
                    "unfinished": sum(not c.finished for c in group),
                    "seeds": [c.seed for c in group],
                    "final_means": finals,
                    "final_mean": float(np.mean(finals)),
                    "final_min": float(np.min(finals)),
                    "reached": len(got),
                    "runs": len(group),
                    "steps_to_threshold": float(np.median([h.env_steps for h in got])) if got else math.nan,
                    "wall_to_threshold": float(np.median([h.wall for h in got])) if got else math.nan,
                    "final_env_steps": float(np.median([c.final.env_steps for c in group])),
                    "final_wall": float(np.median([c.final.wall for c in group])),
                }
            )
    return rows


def _m(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x / 1e6:.2f} M"


def _t(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.0f} s" if x < 120 else f"{x / 60:.0f} min" if x < 7200 else f"{x / 3600:.1f} h"


def markdown(rows: list[dict], command: str, episodes: int) -> str:
    table = md_table(
        [
            *["task (threshold)", "method", "seeds", "final test (each seed)", "reached", "env steps to it"],
            *["wall time to it", "env steps, wall time in all"],
        ],
        [
            [
                f"{r['env']} ({r['threshold']:g})",
                r["method"],
                " ".join(map(str, r["seeds"])),
                f"{r['final_mean']:.1f} ({', '.join(f'{x:.0f}' for x in r['final_means'])})"
                + (f"; {r['unfinished']} unfinished: latest policy" if r["unfinished"] else ""),
                f"{r['reached']}/{r['runs']}",
                _m(r["steps_to_threshold"]),
                _t(r["wall_to_threshold"]),
                f"{_m(r['final_env_steps'])}, {_t(r['final_wall'])}",
            ]
            for r in rows
        ],
        align="llllrrrr",
    )
    return (
        f'Evolution against PPO: test means over {episodes} episodes of the test stream; "reached": '
        f"seeds whose tested policies passed the threshold, with the median env steps and wall time of "
        f"the first tested point that did (an upper bound).\n\n```\n{command}\n```\n\n{table}\n"
    )


def plot(curves: list[Curve], thresholds: dict[str, float], out: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    envs = sorted({c.env for c in curves})
    fig, axes = plt.subplots(len(envs), 2, figsize=(11, 3.4 * len(envs)), squeeze=False)
    methods = sorted({c.method for c in curves})
    colours = {m: f"C{i}" for i, m in enumerate(methods)}
    for row, env in zip(axes, envs):
        for ax, x, label in ((row[0], "env_steps", "env steps (M)"), (row[1], "wall", "wall time (min)")):
            scale = 1e6 if x == "env_steps" else 60.0
            for c in curves:
                if c.env != env:
                    continue
                xs = [getattr(p, x) / scale for p in c.points]
                ax.plot(
                    xs,
                    [p.test_mean for p in c.points],
                    "-o",
                    ms=3,
                    color=colours[c.method],
                    alpha=0.8,
                    label=c.method
                    if c.seed == min(d.seed for d in curves if d.method == c.method and d.env == env)
                    else None,
                )
            if env in thresholds:
                ax.axhline(thresholds[env], color="k", ls="--", lw=0.8)
            ax.set_xlabel(label)
            ax.set_ylabel(f"{env} test return")
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def compare(
    paths: list[Path],
    points: int,
    episodes: int,
    thresholds: dict[str, float],
    out_dir: Path,
    name: str,
    command: str,
    log=print,
) -> dict:
    from synapto.store import RunData

    out_dir.mkdir(parents=True, exist_ok=True)
    cache = Cache(out_dir / "compare_cache.json")
    curves = []
    for path in paths:
        with RunData(path) as run:
            kind = run.kind
        curves.append((evolve_curve if kind == "evolve" else ppo_curve)(Path(path), points, episodes, cache, log))
    rows = summarise(curves, thresholds)
    result = {
        "command": command,
        "episodes": episodes,
        "thresholds": thresholds,
        "summary": rows,
        "runs": [asdict(c) for c in curves],
    }
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1))
    (out_dir / f"{name}.md").write_text(markdown(rows, command, episodes))
    drawn = plot(curves, thresholds, out_dir / f"{name}.png")
    log(markdown(rows, command, episodes))
    log(f"-> {out_dir / (name + '.md')}, {name}.json" + (f", {name}.png" if drawn else " (no matplotlib: no plot)"))
    return result


def threshold_item(item: str, several: bool = False) -> tuple[str, list[float]]:
    """A ``--threshold ENV=NUMBER`` item (``ENV=NUMBER[,NUMBER...]`` where ``several``): its
    task and numbers (one-line errors)."""
    env, sep, values = item.partition("=")
    try:
        xs = [float(v) for v in (values.split(",") if several else [values])]
    except ValueError:
        sep = ""
    if not sep or not env.strip():
        raise UsageError(f"--threshold expects ENV=NUMBER{'[,NUMBER...]' if several else ''}, got {item!r}")
    if not all(math.isfinite(x) for x in xs):  # nan is never reached, inf always or never
        raise UsageError(f"--threshold {item!r}: the threshold must be a finite number")
    return env.strip(), xs


def parse_thresholds(items: list[str]) -> dict[str, float]:
    """:data:`THRESHOLDS` with ``--threshold ENV=NUMBER`` items over them (one-line errors)."""
    return {**THRESHOLDS, **{env: xs[0] for env, xs in map(threshold_item, items)}}


def refuse_repeated_runs(paths) -> None:
    """One run counts once: the same file named twice (a link, another spelling) or a copy
    of a run (the same ``run_id``) would count as a second seed."""
    from synapto.store import RunData

    seen: dict[str, str] = {}
    for path in paths:
        try:
            with RunData(path) as run:
                run_id = run.run_id
        except Exception:  # unreadable here: the reading that follows says why in one line
            run_id = ""
        key = run_id or str(Path(path).resolve())
        for other in (key, str(Path(path).resolve())):
            if other in seen:
                raise UsageError(f"{str(path)!r} is the same run as {seen[other]!r}: give each run once")
        seen[key] = seen[str(Path(path).resolve())] = str(path)


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("compare")
    def bench_compare(
        runs: Annotated[
            list[Path],
            typer.Argument(
                help="Finished run files of synapto evolve (a centre strategy) and synapto ppo, any tasks and seeds."
            ),
        ],
        points: Annotated[int, typer.Option(help="Checkpointed policies tested per run, besides the final one.")] = 10,
        episodes: Annotated[int, typer.Option(help="Test episodes per policy.")] = 100,
        threshold: Annotated[
            list[str] | None,
            typer.Option(help="ENV=X: a task's threshold (repeatable).", show_default="each task's, docs/compare.md"),
        ] = None,
        out_dir: Annotated[Path, typer.Option(help="Folder of the outputs and the test cache.")] = Path("bench"),
        name: Annotated[str, typer.Option(help="Output name: NAME.md, NAME.json, NAME.png.")] = "compare",
    ):
        """Evolution against PPO: env steps and wall time to each task's threshold, final tests, curves."""
        if points < 0:
            raise UsageError(f"--points must be an integer >= 0, got {points}")
        if episodes < 1:
            raise UsageError(f"--episodes must be an integer >= 1, got {episodes}")
        thresholds = parse_thresholds(threshold or [])
        if out_dir.exists() and not out_dir.is_dir():
            raise UsageError(f"--out-dir {str(out_dir)!r} exists and is not a folder")
        for path in runs:
            if not Path(path).is_file():
                raise UsageError(f"{str(path)!r} is not a run file")
        refuse_repeated_runs(runs)
        words = [
            *map(str, runs),
            "--points",
            str(points),
            "--episodes",
            str(episodes),
            *(w for item in threshold or [] for w in ("--threshold", item)),
            "--out-dir",
            str(out_dir),
            "--name",
            name,
        ]
        command = "python -m synapto bench compare " + " ".join(shlex.quote(w) for w in words)
        compare([Path(p) for p in runs], points, episodes, thresholds, out_dir, name, command)
