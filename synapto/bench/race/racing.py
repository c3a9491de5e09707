"""The race itself: its tasks (:func:`plan`), what it runs with (:class:`Setup`), every
method on every seed in turn (:func:`race`), then the tests, the projection and the
report (race.json, race.md, race.png)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from synapto.agents import build_agent
from synapto.bench import compare
from synapto.bench.compare import Cache
from synapto.bench.race import runs as race_runs, sb3 as sb3_race
from synapto.bench.race.projection import project
from synapto.bench.race.report import markdown
from synapto.bench.race.runs import ppo_processes, score
from synapto.bench.race.sb3 import run_sb3
from synapto.common.errors import UsageError
from synapto.evolution.config import EvolveConfig
from synapto.evolution.strategies import make_strategy
from synapto.ppo.config import build_config, load_ppo_toml


def task_of_evolve(config: str, seed: int = 0) -> str:
    """The env of the evolve config ``config``, checked whole as the race runs it (with
    ``seed``): a centre strategy, whose checkpointed centres the race tests."""
    cfg = EvolveConfig.from_toml(config, seed=seed)
    if "centre" not in make_strategy(cfg, build_agent(cfg), np.random.default_rng(0)).record_arrays():
        raise UsageError(
            f"--evolve-config {config!r} runs {cfg.strategy}: the race tests checkpointed centres, "
            f"which a centre strategy has (openai-es, pgpe, cmaes, ars)"
        )
    return cfg.env


def ppo_config(config: str):
    values = {k: v for k, v in load_ppo_toml(config).items() if k not in ("seed", "cpu", "out")}
    return build_config(values)


def _pair(evolve_config: str, ppo_config_path: str | None, cores: int, seed: int = 0) -> dict:
    env = task_of_evolve(evolve_config, seed)
    task: dict[str, Any] = {"task": env, "evolve_config": evolve_config, "ppo_config": ppo_config_path}
    task["ppo_processes"] = None
    if ppo_config_path is not None:
        cfg = ppo_config(ppo_config_path)
        if env != cfg.env:
            raise UsageError(
                f"--evolve-config {evolve_config!r} runs {env} and --ppo-config {ppo_config_path!r} runs "
                f"{cfg.env}: a task's two configs must run the same env"
            )
        task["ppo_processes"] = ppo_processes(cfg.n_envs, cores)
    return task


def plan(
    evolve_configs: list[str], ppo_configs: list[str], cores: int, sb3: str | None = None, seed: int = 0
) -> list[dict]:
    """The tasks: each evolve config paired with the PPO config of the same place, same env
    (with ``sb3``, the PPO configs may be left out; the evolve configs checked whole with the
    race's first ``seed``)."""
    if not evolve_configs or (len(evolve_configs) != len(ppo_configs) and (ppo_configs or sb3 is None)):
        raise UsageError(
            f"--evolve-config and --ppo-config pair up, one of each per task (or --sb3 in place of "
            f"--ppo-config): got {len(evolve_configs)} and {len(ppo_configs)}"
        )
    pcs: list[str | None] = list(ppo_configs) if ppo_configs else [None] * len(evolve_configs)
    tasks = [_pair(ec, pc, cores, seed) for ec, pc in zip(evolve_configs, pcs)]
    if len({t["task"] for t in tasks}) != len(tasks):
        raise UsageError("each task (env) may appear once among the config pairs")
    if sb3 is not None:
        for t in tasks:
            sb3_race.settings(sb3, t["task"])
    return tasks


@dataclass
class Setup:
    """What a race runs with, besides its tasks."""

    workers: int
    cores: int
    seeds: list[int]
    points: int
    episodes: int
    thresholds: dict  #: task -> its thresholds, the first the runs table's
    out_dir: Path
    command: str
    load: dict
    loaded: bool
    per_task: float
    max_minutes: float | None = None
    sb3: str | None = None
    per_worker: int | None = None


def contenders(t: dict, s: Setup, log) -> list:
    """The task's methods, each a function of the seed that runs it and returns its record."""
    common = {"out_dir": s.out_dir, "task": t["task"], "log": log, "max_minutes": s.max_minutes}
    out = [partial(race_runs.run_method, "evolve", t["evolve_config"], s.workers, s.workers + 1, s.cores, **common)]
    if t["ppo_config"] is not None:
        ppo = (t["ppo_config"], s.workers, t["ppo_processes"], s.cores)
        out.append(partial(race_runs.run_method, "ppo", *ppo, **common))
    if s.sb3 is not None:
        out.append(
            partial(
                run_sb3,
                s.sb3,
                t["task"],
                cores=s.cores,
                out_dir=s.out_dir,
                max_minutes=s.max_minutes,
                points=s.points,
                log=log,
            )
        )
    return out


def race(tasks: list[dict], s: Setup, log=print) -> dict:
    s.out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for t in tasks:
        methods = contenders(t, s, log)
        for i, seed in enumerate(s.seeds):
            runs += [run(seed) for run in (methods if i % 2 == 0 else methods[::-1])]
    cache = Cache(s.out_dir / "race_cache.json")
    curves = [score(r, s.points, s.episodes, s.thresholds, cache, log) for r in runs]
    result = {
        "command": s.command,
        "workers": s.workers,
        "cores": s.cores,
        "shared_coordinator": s.cores == s.workers,
        "seeds": s.seeds,
        "points": s.points,
        "episodes": s.episodes,
        "thresholds": s.thresholds,
        "max_minutes": s.max_minutes,
        "sb3": s.sb3,
        "population_per_worker": s.per_worker,
        "load": s.load,
        "loaded": s.loaded,
        "runs": runs,
        "projection": project(runs, s.thresholds, per_task=s.per_task, per_worker=s.per_worker),
    }
    write(result, s.out_dir, log, curves)
    return result


def write(result: dict, out_dir: Path, log, curves) -> None:
    """race.json, race.md and race.png."""
    (out_dir / "race.json").write_text(json.dumps(result, indent=1, default=_plain))
    md = markdown(result)
    (out_dir / "race.md").write_text(md)
    firsts = {k: v[0] for k, v in result["thresholds"].items()}
    drawn = compare.plot(curves, firsts, out_dir / "race.png")
    log(md)
    log(f"-> {out_dir / 'race.md'}, race.json" + (", race.png" if drawn else " (no matplotlib: no plot)"))


def _plain(x):
    return None if isinstance(x, float) and not math.isfinite(x) else str(x)
