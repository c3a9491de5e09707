"""``synapto bench race``'s command line: its options, their checks (one line, exit 2),
then :func:`synapto.bench.race.racing.race` or, with ``--project-only``,
:func:`synapto.bench.race.reproject.reproject`."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

import typer

from synapto.common.declare import Request, command, flag, opt
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir


def check(o: RaceOptions, seeds: list[int]) -> None:
    """Every option's own check, one line and exit 2 for the first that fails."""
    from synapto.bench.race.sb3 import ALGOS, require_extra

    if o.workers < 1:
        raise UsageError(f"--workers must be an integer >= 1, got {o.workers}")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds has repeated values {seeds}")
    if o.points < 1 or o.episodes < 1:
        raise UsageError(f"--points and --episodes must be integers >= 1, got {o.points} and {o.episodes}")
    if min(seeds) < 0:
        raise UsageError(f"--seeds must be integers >= 0, got {seeds}")
    for name, value in (("--max-busy", o.max_busy), ("--coordinator-us", o.coordinator_us)):
        if not (math.isfinite(value) and value >= 0):  # nan would pass a "< 0" check
            raise UsageError(f"{name} must be a finite number >= 0, got {value}")
    if o.max_minutes is not None and not o.max_minutes > 0:
        raise UsageError(f"--max-minutes must be > 0, got {o.max_minutes}")
    if o.population_per_worker is not None and o.population_per_worker < 1:
        raise UsageError(f"--population-per-worker must be an integer >= 1, got {o.population_per_worker}")
    if o.sb3 is not None:
        if o.sb3 not in ALGOS:
            raise UsageError(f"--sb3 must be one of {', '.join(ALGOS)}, got {o.sb3!r}")
        require_extra(o.sb3)


def command_line(evolve_config, ppo_config, threshold, options: dict) -> str:
    words = [
        *(w for c in evolve_config for w in ("--evolve-config", c)),
        *(w for c in ppo_config for w in ("--ppo-config", c)),
        *(w for item in threshold for w in ("--threshold", item)),
    ]
    for name, value in options.items():
        if value is True:
            words.append(name)
        elif isinstance(value, list):
            words += [name, *map(str, value)]
        elif value is not None and value is not False:
            words += [name, str(value)]
    return "python -m synapto bench race " + " ".join(shlex.quote(w) for w in words)


def start(tasks, setup_args: dict, max_busy: float, allow_load: bool) -> None:
    from synapto.bench.race import load as race_load
    from synapto.bench.race.racing import Setup, race

    for t in tasks:
        if t["task"] not in setup_args["thresholds"]:
            raise UsageError(f"{t['task']} has no threshold; pass --threshold {t['task']}=X")
    load = race_load.measure()
    why = race_load.verdict(load, setup_args["cores"], max_busy)
    if why and not allow_load:
        raise UsageError(f"{why}: the wall times would be biased; pass --allow-load to race anyway")
    if why:
        print(f"warning: {why}; racing anyway (--allow-load)", flush=True)
    race(tasks, Setup(load=load, loaded=bool(why), **setup_args), log=lambda msg: print(msg, flush=True))


def reproject_only(paths, threshold: list[str], out_dir: Path, coordinator_us: float, per_worker, words) -> None:
    from synapto.bench.race.reproject import reproject

    command = command_line([], [], threshold, words)
    reproject(paths, threshold, out_dir, coordinator_us * 1e-6, per_worker, command)


@dataclass(frozen=True)
class RaceOptions:
    """``synapto bench race``'s options."""

    evolve_config: list[str] | None = opt(
        None,
        help="Evolution config of a task (repeatable; a centre strategy: openai-es, pgpe, cmaes, ars).",
        show_default="none, required",
    )
    ppo_config: list[str] | None = opt(
        None,
        help="PPO config of the same task (repeatable, paired in order with --evolve-config; "
        "may be left out with --sb3).",
        show_default="none",
    )
    sb3: str | None = opt(
        None,
        help="Race Stable-Baselines3's tqc (sb3-contrib) or sac too, with rl-baselines3-zoo's settings "
        "for the task (the sb3 extra).",
        show_default="none",
    )
    workers: int = opt(1, help="Evolution's workers W: every method gets W + 1 cores.")
    shared_coordinator: bool = opt(
        False,
        flags=("--shared-coordinator",),
        help="Every method gets W cores: evolution's coordinator (idle while its workers evaluate) "
        "shares them, and PPO runs W processes.",
    )
    seeds: list[int] | None = opt(None, help="Seeds, each a race of every method.", show_default="1", multi=True)
    points: int = opt(10, help="Checkpointed policies tested per run, besides the final.")
    episodes: int = opt(100, help="Test episodes per policy.")
    threshold: list[str] | None = opt(
        None,
        help="ENV=X or ENV=X,Y: a task's thresholds (repeatable; the first is the runs table's).",
        show_default="bench compare's",
    )
    max_minutes: float | None = opt(
        None,
        help="Stop each run after M minutes; one that has not passed a threshold by then "
        "is reported as not reached within M minutes, with its score.",
        show_default="none: each run to its budget",
    )
    out_dir: Path = opt(Path("bench/race"), help="Folder of race.md, race.json, race.png, runs/.")
    allow_load: bool = opt(
        False, flags=("--allow-load",), help="Race even when other load would bias the wall times (it is recorded)."
    )
    max_busy: float = opt(
        0.5, help="Other load (busy cores, /proc/stat over 1 s) above which the race refuses to start."
    )
    coordinator_us: float = opt(
        24.0, help="The projection's coordinator CPU per task (µs; bench farm's noise-key figure)."
    )
    population_per_worker: int | None = opt(
        None,
        help="Project evolution at W workers from the runs of the largest measured population up to K x W.",
        show_default="none",
    )
    project_only: list[Path] | None = opt(
        None,
        help="Run nothing: project again from earlier races (their --out-dir or race.json, several allowed), "
        "into --out-dir/projection.md and projection.json.",
        show_default="none",
        multi=True,
    )


#: the options a race's report repeats in its command line, in that order
WORDS = (
    *("sb3", "workers", "shared_coordinator", "seeds", "points", "episodes", "max_minutes"),
    *("population_per_worker", "coordinator_us", "out_dir", "allow_load"),
)


def register(bench_app: typer.Typer) -> None:
    bench_app.command("race")(command(bench_race, RaceOptions))


def bench_race(request: Request) -> None:
    """Evolution against PPO or SB3 on the same cores: wall time and env steps to each task's threshold."""
    from synapto.bench.race.racing import plan
    from synapto.bench.race.runs import parse_thresholds

    o = request.build(RaceOptions)
    seeds = list(o.seeds or [1])
    check(o, seeds)
    thresholds = parse_thresholds(o.threshold or [])
    check_out_dir(o.out_dir)
    evolve_config, ppo_config = list(o.evolve_config or []), list(o.ppo_config or [])
    options = {flag(RaceOptions, name): getattr(o, name) for name in WORDS} | {"--seeds": seeds}
    if o.project_only:
        if evolve_config or ppo_config or o.sb3:
            raise UsageError("--project-only runs nothing: give it no --evolve-config, --ppo-config or --sb3")
        keep = ("--coordinator-us", "--population-per-worker", "--out-dir")
        words = {"--project-only": list(o.project_only), **{k: options[k] for k in keep}}
        reproject_only(o.project_only, o.threshold or [], o.out_dir, o.coordinator_us, o.population_per_worker, words)
        return
    cores = o.workers if o.shared_coordinator else o.workers + 1

    tasks = plan(evolve_config, ppo_config, cores, o.sb3, seeds[0])
    setup = {
        "workers": o.workers,
        "cores": cores,
        "seeds": seeds,
        "points": o.points,
        "episodes": o.episodes,
        "thresholds": thresholds,
        "out_dir": o.out_dir,
        "command": command_line(evolve_config, ppo_config, o.threshold or [], options),
        "per_task": o.coordinator_us * 1e-6,
        "max_minutes": o.max_minutes,
        "sb3": o.sb3,
        "per_worker": o.population_per_worker,
    }
    start(tasks, setup, o.max_busy, o.allow_load)
