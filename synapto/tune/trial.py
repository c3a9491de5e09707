"""One trial: the base config with the sampled values, run on every tuning seed, scored on
the TUNE stream; validation means go to the pruner at fixed env-step milestones.

Milestones: a run of ``max_env_steps`` M has ``milestones`` K checkpoints at k M / K env
steps (training + validation, k = 1..K).  The value at milestone k is the mean of the
generations' validation means (the population mean where validation is off) since the
milestone before; on the s-th seed (0-based) the trial reports, at step s M + k M / K, the
mean of that value over seeds 0..s.  Every trial thus reports at the same steps (the env
steps it has spent), on the same seeds in the same order, and the pruner compares like
with like.  The hook is an evolution callback (:mod:`synapto.tracking.callbacks`): the
loop is unchanged; a pruned trial's run stops at the generation that reported.

Run files: ``TRIALS/<n>/s<seed>.h5`` where ``n`` is the trial's number (a trial rerun after
a crash keeps the folder of the trial it reruns).  A seed whose run file is finished and
was run with the same config is not run again: its rows are reported from the file.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import NoReturn

import numpy as np

from synapto.api import evolve
from synapto.common.errors import UsageError
from synapto.common.logs import debug
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import RunStopped
from synapto.store import RunData
from synapto.tune.base import checked_config, trial_config, with_params
from synapto.tune.process import process_token
from synapto.tune.score import score_run
from synapto.tune.study import claim


class MilestoneReporter:
    """An evolution callback that reports a trial's intermediate values to Optuna."""

    def __init__(
        self,
        trial,
        seed_index: int,
        max_env_steps: int,
        milestones: int,
        history: list[list[float]],
        steps_done: int = 0,
    ):
        self.trial, self.s, self.m, self.k_total = trial, seed_index, max_env_steps, milestones
        self.steps_done = steps_done  #: env steps of the trial's earlier seeds
        self.history = history  #: history[s][k]: seed s's value at milestone k
        self.values: list[float] = []
        self.window: list[float] = []
        self.env_steps = 0
        self.last = -1e300  #: the value of the last milestone (-1e300: no finite value yet)
        history.append(self.values)

    def milestone_steps(self, k: int) -> int:
        return -(-self.m * (k + 1) // self.k_total)

    def __call__(self, report) -> None:
        self.see(report.env_steps, report.stats)

    def see(self, env_steps: int, stats) -> None:
        """One generation's cumulative env steps and stats row; raises ``optuna.TrialPruned``."""
        import optuna

        self.env_steps = int(env_steps)
        value = stats.get("validation_mean", math.nan)
        self.window.append(float(value if math.isfinite(value) else stats["pop_mean"]))
        while len(self.values) < self.k_total and env_steps >= self.milestone_steps(len(self.values)):
            k = len(self.values)
            if self.window:  # a generation that passes several milestones gives them one value
                finite = [v for v in self.window if math.isfinite(v)]
                self.last = float(np.mean(finite)) if finite else -1e300
                self.window = []
            self.values.append(self.last)
            mean = float(np.mean([h[k] for h in self.history]))
            self.trial.report(mean, self.s * self.m + self.milestone_steps(k))
            if self.trial.should_prune():
                self.trial.set_user_attr("env_steps", self.steps_done + self.env_steps)
                raise optuna.TrialPruned(f"pruned at milestone {k + 1} of seed {self.s + 1}")


class TrialStopped(Exception):
    """A trial's run stopped (a task that failed or ran past the base's ``task-timeout``):
    the study stops as ``evolve`` does, with one line (exit code 1)."""


class Objective:
    """``study.optimize``'s function: a trial's tuning score (the mean over seeds)."""

    def __init__(
        self,
        space,
        base: dict,
        seeds: list[int],
        trials_dir: Path,
        workers: int = 0,
        milestones: int = 10,
        score_episodes: int = 100,
        log=print,
        n_trials: int = 1,
        sampler_seed: int = 0,
        task_timeout: float | None = None,
    ):
        self.space, self.base, self.seeds = space, base, list(seeds)
        self.trials_dir, self.workers = Path(trials_dir), workers
        self.milestones, self.score_episodes, self.log = milestones, score_episodes, log
        self.n_trials, self.sampler_seed, self.task_timeout = n_trials, sampler_seed, task_timeout
        self.current = None  #: the trial running now (for an interrupted one to be requeued)

    def __call__(self, trial) -> float:
        self.current = trial
        t0 = time.perf_counter()
        trial.set_user_attr("host_pid", process_token())  # first: a trial with params names its process
        claim(trial, self.n_trials, self.sampler_seed)
        params = self.space.suggest(trial)
        run_dir = trial.user_attrs.get("run_dir", str(trial.number))
        trial.set_user_attr("run_dir", run_dir)
        values = with_params(self.base, params)
        self.log(f"trial {trial.number}: {params}")
        try:
            checked_config(values, self.seeds[0])
        except UsageError as exc:
            self._fail(trial, f"its config is invalid ({exc})")
        scores, steps, run_wall, score_wall = self._seeds(trial, values, run_dir)
        value = float(np.mean(scores))
        for key, v in (
            ("scores", scores),
            ("env_steps", steps),
            ("run_wall", run_wall),
            ("score_wall", score_wall),
            ("trial_wall", time.perf_counter() - t0),
        ):
            trial.set_user_attr(key, v)
        seeds = ", ".join(f"{x:.1f}" for x in scores)
        if not math.isfinite(value):
            self._fail(trial, f"its tuning score is {value} (seeds {seeds})")
        self.log(f"trial {trial.number}: tuning score {value:.2f} (seeds {seeds})")
        return value

    def _seeds(self, trial, values: dict, run_dir: str) -> tuple[list[float], int, float, float]:
        """Run and score every tuning seed: (scores, env steps, run wall, score wall)."""
        import optuna

        history: list[list[float]] = []
        scores, steps, run_wall, score_wall = [], 0, 0.0, 0.0
        for s, seed in enumerate(self.seeds):
            cfg = trial_config(values, seed)
            out = self.trials_dir / run_dir / f"s{seed}.h5"
            reporter = MilestoneReporter(trial, s, cfg.max_env_steps, self.milestones, history, steps)
            try:
                run_wall += self._run(cfg, out, reporter)
            except optuna.TrialPruned as exc:
                self.log(f"trial {trial.number}: {exc}")
                raise
            t1 = time.perf_counter()
            try:
                result = _score(out, self.score_episodes)
            except UsageError:
                raise
            except Exception as exc:  # the env raised on a scoring episode: the study stops, as the run would
                why = f"{type(exc).__name__}: {exc}".splitlines()[0]
                raise TrialStopped(
                    f"trial {trial.number}, seed {seed}: scoring on the TUNE stream failed ({why})"
                ) from None
            score_wall += time.perf_counter() - t1
            scores.append(result.score)
            steps += result.env_steps
        return scores, steps, run_wall, score_wall

    def _fail(self, trial, why: str) -> NoReturn:
        """End ``trial`` as failed: pruned (it counts as finished, and ranks last for the
        sampler), marked ``failed`` with ``why``, said in one warning line."""
        import optuna

        trial.set_user_attr("failed", why)
        self.log(f"warning: trial {trial.number} failed: {why}; counted as finished, the study goes on")
        raise optuna.TrialPruned(why)

    def _run(self, cfg, out: Path, reporter: MilestoneReporter) -> float:
        """Run (or reuse) one seed's run file; returns the run's wall time."""
        if _finished_with(out, cfg):
            _replay_rows(out, reporter)
            return 0.0
        out.parent.mkdir(parents=True, exist_ok=True)
        callbacks = [reporter] if cfg.max_env_steps else []
        try:
            summary = evolve(
                cfg,
                out,
                workers=self.workers,
                force=True,
                log=debug,
                callbacks=callbacks,
                task_timeout=self.task_timeout,
            )
        except RunStopped as exc:
            raise TrialStopped(f"trial {reporter.trial.number}, seed {cfg.seed}: {exc}") from None
        except RuntimeError as exc:  # the MPI run of --workers stopped: its last line says why
            if not self.workers:
                raise
            why = str(exc).splitlines()[-1].removeprefix(f"{RunStopped.__module__}.RunStopped: ")
            raise TrialStopped(f"trial {reporter.trial.number}, seed {cfg.seed}: {why}") from None
        return summary.wall


def _score(out: Path, episodes: int):
    return score_run(out, episodes)


def _finished_with(out: Path, cfg) -> bool:
    """Whether ``out`` is a finished run of exactly ``cfg``."""
    if not out.exists():
        return False
    try:
        with RunData(out, kind="evolve") as run:
            return bool(run.finished) and EvolveConfig.from_json(run.config_json) == cfg
    except (UsageError, OSError):
        return False


def _replay_rows(out: Path, reporter: MilestoneReporter) -> None:
    """Report a finished run's generations from its file, as its callbacks saw them."""
    with RunData(out, kind="evolve") as run:
        steps = run.stats("env_steps") + run.stats("validation_env_steps")
        val, pop = run.stats("validation_mean"), run.stats("pop_mean")
    if reporter.m:
        for g in range(len(steps)):
            reporter.see(int(steps[g]), {"validation_mean": float(val[g]), "pop_mean": float(pop[g])})
