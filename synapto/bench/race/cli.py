"""``synapto bench race``'s command line: its options, their checks (one line, exit 2),
then :func:`synapto.bench.race.racing.race` or, with ``--project-only``,
:func:`synapto.bench.race.reproject.reproject`."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Annotated

import typer

from synapto.bench.race.thresholds import parse_thresholds
from synapto.errors import UsageError


def check(workers, seeds, points, episodes, max_busy, coordinator_us, max_minutes, per_worker, sb3) -> None:
    if workers < 1:
        raise UsageError(f"--workers must be an integer >= 1, got {workers}")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds has repeated values {seeds}")
    if points < 1 or episodes < 1:
        raise UsageError(f"--points and --episodes must be integers >= 1, got {points} and {episodes}")
    if min(seeds) < 0:
        raise UsageError(f"--seeds must be integers >= 0, got {seeds}")
    for flag, value in (("--max-busy", max_busy), ("--coordinator-us", coordinator_us)):
        if not (math.isfinite(value) and value >= 0):  # nan would pass a "< 0" check
            raise UsageError(f"{flag} must be a finite number >= 0, got {value}")
    if max_minutes is not None and not max_minutes > 0:
        raise UsageError(f"--max-minutes must be > 0, got {max_minutes}")
    if per_worker is not None and per_worker < 1:
        raise UsageError(f"--population-per-worker must be an integer >= 1, got {per_worker}")
    if sb3 is not None:
        from synapto.bench.race.sb3 import ALGOS, require_extra

        if sb3 not in ALGOS:
            raise UsageError(f"--sb3 must be one of {', '.join(ALGOS)}, got {sb3!r}")
        require_extra(sb3)


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
    from synapto.bench.race.load import measure, verdict
    from synapto.bench.race.racing import Setup, race

    for t in tasks:
        if t["task"] not in setup_args["thresholds"]:
            raise UsageError(f"{t['task']} has no threshold; pass --threshold {t['task']}=X")
    load = measure()
    why = verdict(load, setup_args["cores"], max_busy)
    if why and not allow_load:
        raise UsageError(f"{why}: the wall times would be biased; pass --allow-load to race anyway")
    if why:
        print(f"warning: {why}; racing anyway (--allow-load)", flush=True)
    race(tasks, Setup(load=load, loaded=bool(why), **setup_args), log=lambda msg: print(msg, flush=True))


def reproject_only(paths, threshold: list[str], out_dir: Path, coordinator_us: float, per_worker, words) -> None:
    from synapto.bench.race.reproject import reproject

    command = command_line([], [], threshold, words)
    reproject(paths, threshold, out_dir, coordinator_us * 1e-6, per_worker, command)


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
                help="PPO config of the same task (repeatable, paired in order with --evolve-config; "
                "may be left out with --sb3).",
                show_default="none",
            ),
        ] = None,
        sb3: Annotated[
            str | None,
            typer.Option(
                help="Race Stable-Baselines3's tqc (sb3-contrib) or sac too, with rl-baselines3-zoo's settings "
                "for the task (the sb3 extra).",
                show_default="none",
            ),
        ] = None,
        workers: Annotated[int, typer.Option(help="Evolution's workers W: every method gets W + 1 cores.")] = 1,
        shared_coordinator: Annotated[
            bool,
            typer.Option(
                "--shared-coordinator",
                help="Every method gets W cores: evolution's coordinator (idle while its workers evaluate) "
                "shares them, and PPO runs W processes.",
            ),
        ] = False,
        seeds: Annotated[
            list[int] | None, typer.Option(help="Seeds, each a race of every method.", show_default="1")
        ] = None,
        points: Annotated[int, typer.Option(help="Checkpointed policies tested per run, besides the final.")] = 10,
        episodes: Annotated[int, typer.Option(help="Test episodes per policy.")] = 100,
        threshold: Annotated[
            list[str] | None,
            typer.Option(
                help="ENV=X or ENV=X,Y: a task's thresholds (repeatable; the first is the runs table's).",
                show_default="bench compare's",
            ),
        ] = None,
        max_minutes: Annotated[
            float | None,
            typer.Option(
                help="Stop each run after M minutes; one that has not passed a threshold by then "
                "is reported as not reached within M minutes, with its score.",
                show_default="none: each run to its budget",
            ),
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
        population_per_worker: Annotated[
            int | None,
            typer.Option(
                help="Project evolution at W workers from the runs of the largest measured population up to K x W.",
                show_default="none",
            ),
        ] = None,
        project_only: Annotated[
            list[Path] | None,
            typer.Option(
                help="Run nothing: project again from earlier races (their --out-dir or race.json, several allowed), "
                "into --out-dir/projection.md and projection.json.",
                show_default="none",
            ),
        ] = None,
    ):
        """Evolution against PPO or SB3 on the same cores: wall time and env steps to each task's threshold."""
        from synapto.folders import check_out_dir

        seeds = list(seeds or [1])
        check(workers, seeds, points, episodes, max_busy, coordinator_us, max_minutes, population_per_worker, sb3)
        thresholds = parse_thresholds(threshold or [])
        check_out_dir(out_dir)
        evolve_config, ppo_config = list(evolve_config or []), list(ppo_config or [])
        options = {
            "--sb3": sb3,
            "--workers": workers,
            "--shared-coordinator": shared_coordinator,
            "--seeds": seeds,
            "--points": points,
            "--episodes": episodes,
            "--max-minutes": max_minutes,
            "--population-per-worker": population_per_worker,
            "--coordinator-us": coordinator_us,
            "--out-dir": out_dir,
            "--allow-load": allow_load,
        }
        if project_only:
            if evolve_config or ppo_config or sb3:
                raise UsageError("--project-only runs nothing: give it no --evolve-config, --ppo-config or --sb3")
            keep = ("--coordinator-us", "--population-per-worker", "--out-dir")
            words = {"--project-only": list(project_only), **{k: options[k] for k in keep}}
            reproject_only(project_only, threshold or [], out_dir, coordinator_us, population_per_worker, words)
            return
        cores = workers if shared_coordinator else workers + 1
        from synapto.bench.race.racing import plan

        tasks = plan(evolve_config, ppo_config, cores, sb3, seeds[0])
        setup = {
            "workers": workers,
            "cores": cores,
            "seeds": seeds,
            "points": points,
            "episodes": episodes,
            "thresholds": thresholds,
            "out_dir": out_dir,
            "command": command_line(evolve_config, ppo_config, threshold or [], options),
            "per_task": coordinator_us * 1e-6,
            "max_minutes": max_minutes,
            "sb3": sb3,
            "per_worker": population_per_worker,
        }
        start(tasks, setup, max_busy, allow_load)
