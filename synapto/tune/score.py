"""The tuning score: a finished run's champion on episodes of the TUNE stream.

Settings are tuned on seeds no benchmark uses and scored on ``episodes`` episodes of
``synapto.common.seeding.tuning_seeds(run seed, episodes)``: neither the training, validation,
selection nor test stream, so tuning never sees a test episode.  ``synapto tune`` uses it
as its objective and ``scripts/tune_score.py`` prints it for hand-tuned runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.agents import build_agent
from synapto.api import rollout
from synapto.common.errors import UsageError
from synapto.common.seeding import tuning_seeds
from synapto.evolution.config import EvolveConfig
from synapto.store import RunData


@dataclass(frozen=True)
class TuneScore:
    """One run's tuning score and what it cost."""

    seed: int  #: the run seed
    score: float  #: mean return of the champion on the tuning episodes
    std: float  #: their standard deviation
    connections: int  #: non-zero entries of the champion's genome
    env_steps: int  #: training + validation + selection env steps of the run
    generations: int  #: generations completed


def run_env_steps(run) -> int:
    """Training, validation and selection env steps of an open :class:`synapto.store.RunData`."""
    steps = int(run.stats("env_steps")[-1]) + int(run.stats("validation_env_steps")[-1])
    selection = run.selection()
    if selection is not None:
        steps += int(selection.steps.sum())
    return steps


def score_run(path: str | Path, episodes: int = 100) -> TuneScore:
    """The :class:`TuneScore` of the finished run file ``path``; an unfinished run (its champion
    not chosen yet: scoring it would score zeros) is a :class:`UsageError`."""
    with RunData(path, kind="evolve") as run:
        if not run.finished:
            raise UsageError(f"{path} is not finished (still running, or stopped: evolve --resume it)")
        cfg = EvolveConfig.from_json(run.config_json)
        champion = run.champion()
        steps = run_env_steps(run)
        generations = run.completed
    result = rollout(
        build_agent(cfg),
        champion.genome,
        cfg.env,
        tuning_seeds(cfg.seed, episodes),
        obs_norm=champion.obs_norm,
        env_options=cfg.make_kwargs,
    )
    returns = np.asarray(result.returns, dtype=np.float64)
    return TuneScore(
        cfg.seed,
        float(returns.mean()),
        float(returns.std()),
        int(np.count_nonzero(champion.genome)),
        steps,
        generations,
    )
