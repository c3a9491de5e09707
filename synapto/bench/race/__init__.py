"""``synapto bench race``: evolution against PPO on the same cores, wall time to threshold.

For each task (a pair ``--evolve-config`` / ``--ppo-config`` of the same env) and seed,
the race runs both methods itself, one after the other on the same cores (evolution with
``W`` workers and its coordinator, PPO with as many processes, :mod:`.runs`), the order
alternating from seed to seed.  With ``--shared-coordinator`` both get ``W`` cores
instead: the coordinator, idle while its workers evaluate, shares them (as ``evolve
--workers 2`` does on a 2-core machine), and PPO runs ``W`` processes.  It then tests
each run's checkpointed policies as ``bench compare`` does (:mod:`synapto.bench.compare`)
and reports, per run: wall time and env steps to the task's threshold, the final test,
CPU seconds, the other load seen just before it (:mod:`.load`); then the projection to
2-64 cores (:mod:`.projection`).

Before it starts, the race measures the machine's other load and refuses (one line,
exit 2) when it would bias the wall times, unless ``--allow-load``; the figures are in
the report either way.  Outputs in ``--out-dir``: ``race.md``, ``race.json`` (``runs``:
one entry per method, task and seed), ``race.png`` (tested return against env steps and
wall time), the run files and logs in ``runs/``, the test cache ``race_cache.json``.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Annotated

import typer

from synapto.errors import UsageError

#: options taking several space-separated values (see synapto.cli.MULTI_VALUE_OPTIONS)
MULTI_VALUE_OPTIONS = ("--seeds",)


def task_of_evolve(config: str, seed: int = 0) -> str:
    """The env of the evolve config ``config``, checked whole as the race runs it (with
    ``seed``): a centre strategy, whose checkpointed centres the race tests."""
    import numpy as np

    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.strategies import make_strategy

    cfg = EvolveConfig.from_toml(config, seed=seed)
    if "centre" not in make_strategy(cfg, build_agent(cfg), np.random.default_rng(0)).record_arrays():
        raise UsageError(
            f"--evolve-config {config!r} runs {cfg.strategy}: the race tests checkpointed centres, "
            f"which a centre strategy has (openai-es, pgpe, cmaes, ars)"
        )
    return cfg.env


def ppo_config(config: str):
    from synapto.ppo.config import build_config, load_ppo_toml

    values = {k: v for k, v in load_ppo_toml(config).items() if k not in ("seed", "cpu", "out")}
    return build_config(values)


def plan(evolve_configs: list[str], ppo_configs: list[str], cores: int, seed: int = 0) -> list[dict]:
    """The tasks: each evolve config paired with the PPO config of the same place, same env
    (both checked whole, with the race's first ``seed``)."""
    from synapto.bench.race.runs import ppo_processes

    if len(evolve_configs) != len(ppo_configs) or not evolve_configs:
        raise UsageError(
            f"--evolve-config and --ppo-config pair up, one of each per task: got "
            f"{len(evolve_configs)} and {len(ppo_configs)}"
        )
    tasks = []
    for ec, pc in zip(evolve_configs, ppo_configs):
        env, cfg = task_of_evolve(ec, seed), ppo_config(pc)
        if env != cfg.env:
            raise UsageError(
                f"--evolve-config {ec!r} runs {env} and --ppo-config {pc!r} runs {cfg.env}: "
                f"a task's two configs must run the same env"
            )
        tasks.append(
            {
                "task": env,
                "evolve_config": ec,
                "ppo_config": pc,
                "ppo_processes": ppo_processes(cfg.n_envs, cores),
            }
        )
    if len({t["task"] for t in tasks}) != len(tasks):
        raise UsageError("each task (env) may appear once among the config pairs")
    return tasks


def race(
    tasks: list[dict],
    workers: int,
    cores: int,
    seeds: list[int],
    points: int,
    episodes: int,
    thresholds: dict,
    out_dir: Path,
    command: str,
    load: dict,
    loaded: bool,
    per_task: float,
    log=print,
) -> dict:
    from synapto.bench.compare import Cache, plot
    from synapto.bench.race.projection import project
    from synapto.bench.race.report import markdown
    from synapto.bench.race.runs import run_method, score

    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for t in tasks:
        for i, seed in enumerate(seeds):
            order = [("evolve", t["evolve_config"], workers), ("ppo", t["ppo_config"], t["ppo_processes"])]
            for method, config, procs in order if i % 2 == 0 else order[::-1]:
                procs = workers + 1 if method == "evolve" else procs
                runs.append(run_method(method, config, workers, procs, cores, seed, out_dir, t["task"], log))
    cache = Cache(out_dir / "race_cache.json")
    curves = [score(r, points, episodes, thresholds, cache, log) for r in runs]
    result = {
        "command": command,
        "workers": workers,
        "cores": cores,
        "shared_coordinator": cores == workers,
        "seeds": seeds,
        "points": points,
        "episodes": episodes,
        "thresholds": thresholds,
        "load": load,
        "loaded": loaded,
        "runs": runs,
        "projection": project(runs, per_task=per_task),
    }
    (out_dir / "race.json").write_text(json.dumps(result, indent=1, default=_plain))
    md = markdown(result)
    (out_dir / "race.md").write_text(md)
    drawn = plot(curves, thresholds, out_dir / "race.png")
    log(md)
    log(f"-> {out_dir / 'race.md'}, race.json" + (", race.png" if drawn else " (no matplotlib: no plot)"))
    return result


def _plain(x):
    return None if isinstance(x, float) and not math.isfinite(x) else str(x)


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("race")
    def bench_race(
        evolve_config: Annotated[
            list[str] | None,
            typer.Option(
                help="Evolution config of a task (repeatable; a centre strategy: openai-es, pgpe, cmaes, ars).",
                show_default="none, required",
            ),
        ] = None,
        ppo_config: Annotated[
            list[str] | None,
            typer.Option(
                help="PPO config of the same task (repeatable, paired in order with --evolve-config).",
                show_default="none, required",
            ),
        ] = None,
        workers: Annotated[int, typer.Option(help="Evolution's workers W: both methods get W + 1 cores.")] = 1,
        shared_coordinator: Annotated[
            bool,
            typer.Option(
                "--shared-coordinator",
                help="Both methods get W cores: evolution's coordinator (idle while its workers evaluate) "
                "shares them, and PPO runs W processes.",
            ),
        ] = False,
        seeds: Annotated[
            list[int] | None, typer.Option(help="Seeds, each a race of both methods.", show_default="1")
        ] = None,
        points: Annotated[int, typer.Option(help="Checkpointed policies tested per run, besides the final.")] = 10,
        episodes: Annotated[int, typer.Option(help="Test episodes per policy.")] = 100,
        threshold: Annotated[
            list[str] | None,
            typer.Option(help="ENV=X: a task's threshold (repeatable).", show_default="bench compare's"),
        ] = None,
        out_dir: Annotated[Path, typer.Option(help="Folder of race.md, race.json, race.png, runs/.")] = Path(
            "bench/race"
        ),
        allow_load: Annotated[
            bool,
            typer.Option("--allow-load", help="Race even when other load would bias the wall times (it is recorded)."),
        ] = False,
        max_busy: Annotated[
            float,
            typer.Option(help="Other load (busy cores, /proc/stat over 1 s) above which the race refuses to start."),
        ] = 0.5,
        coordinator_us: Annotated[
            float, typer.Option(help="The projection's coordinator CPU per task (µs; bench farm's noise-key figure).")
        ] = 24.0,
    ):
        """Evolution against PPO on the same cores: wall time and env steps to each task's threshold."""
        from synapto.bench.race.load import measure, verdict
        from synapto.folders import check_out_dir

        seeds = list(seeds or [1])
        if workers < 1:
            raise UsageError(f"--workers must be an integer >= 1, got {workers}")
        if len(set(seeds)) != len(seeds):
            raise UsageError(f"--seeds has repeated values {seeds}")
        if min(seeds) < 0:
            raise UsageError(f"--seeds must be integers >= 0, got {seeds}")
        if points < 1 or episodes < 1:
            raise UsageError(f"--points and --episodes must be integers >= 1, got {points} and {episodes}")
        for flag, value in (("--max-busy", max_busy), ("--coordinator-us", coordinator_us)):
            if not (math.isfinite(value) and value >= 0):  # nan would pass a "< 0" check
                raise UsageError(f"{flag} must be a finite number >= 0, got {value}")
        from synapto.bench.compare import parse_thresholds

        thresholds = parse_thresholds(threshold or [])
        check_out_dir(out_dir)
        evolve_config, ppo_config = list(evolve_config or []), list(ppo_config or [])
        cores = workers if shared_coordinator else workers + 1
        tasks = plan(evolve_config, ppo_config, cores, seeds[0])
        for t in tasks:
            if t["task"] not in thresholds:
                raise UsageError(f"{t['task']} has no threshold; pass --threshold {t['task']}=X")
        load = measure()
        why = verdict(load, cores, max_busy)
        if why and not allow_load:
            raise UsageError(f"{why}: the wall times would be biased; pass --allow-load to race anyway")
        if why:
            print(f"warning: {why}; racing anyway (--allow-load)", flush=True)
        words = [
            *(w for c in evolve_config for w in ("--evolve-config", c)),
            *(w for c in ppo_config for w in ("--ppo-config", c)),
            "--workers",
            str(workers),
            *(["--shared-coordinator"] if shared_coordinator else []),
            "--seeds",
            *map(str, seeds),
            "--points",
            str(points),
            "--episodes",
            str(episodes),
            *(w for item in threshold or [] for w in ("--threshold", item)),
            "--out-dir",
            str(out_dir),
            *(["--allow-load"] if allow_load else []),
        ]
        command = "python -m synapto bench race " + " ".join(shlex.quote(w) for w in words)
        race(
            tasks,
            workers,
            cores,
            seeds,
            points,
            episodes,
            thresholds,
            out_dir,
            command,
            load,
            bool(why),
            coordinator_us * 1e-6,
            log=lambda msg: print(msg, flush=True),
        )
