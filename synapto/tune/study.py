"""The study in its database, and the loop that adds trials to it until ``--trials`` finished.

The database is :mod:`.storage`'s.  Several ``tune`` processes (on one machine, or Slurm
jobs on many sharing a database server or a SQLite file on a file system with working
locks) given the same command share the study: each asks Optuna for the next trial, and
each stops when ``--trials`` trials are finished (waiting for the last ones, which run
elsewhere, and rerunning any whose process died).

Crashes.  Every trial records its process (``host:pid:start time``) and beats a heartbeat
into the database.  A trial left RUNNING by a process that is gone -- found at once on the
same host, or through a heartbeat older than the grace period on another -- is marked
FAIL and its parameters are enqueued again (with its run folder), so the next free process
reruns it: finished trials are kept, nothing is counted twice.

Sharing.  A trial's sampler seed is (``--sampler-seed``, its sample index): the number of
trials before it that sampled (reruns and surplus trials left out).  Processes that start
trials at once sample distinct points, and a study that was killed and continued samples
what an uninterrupted one samples (:func:`synapto.common.seeding.sampler_seed`; Hyperband's
brackets depend on trial numbers, which a rerun trial shifts).  A trial that finds
``--trials`` trials before it (finished, running or queued: several processes asked at
once) is surplus: it ends FAIL before it samples, marked ``surplus``, and is neither run
nor counted.  A trial that cannot be scored (:mod:`.trial`: a config that breaks a rule, a
score that is not a number) ends PRUNED, marked ``failed``, and counts as finished: the
study goes on and ends.
"""

from __future__ import annotations

import json
import time

import optuna
from optuna.trial import TrialState

from synapto.common.errors import UsageError
from synapto.common.seeding import sampler_seed as seed_for
from synapto.tune.process import token_alive

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
PRUNERS = ("median", "halving", "hyperband", "none")


def make_pruner(name: str, milestones: int):
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    return optuna.pruners.NopPruner()


def open_study(storage, name: str, identity: dict, pruner):
    """Create or load the study ``name``; a study made by another command is refused."""
    study = optuna.create_study(
        storage=storage, study_name=name, direction="maximize", load_if_exists=True, pruner=pruner
    )
    if len(study.directions) != 1:
        raise UsageError(f"study {name!r} has {len(study.directions)} objectives; tune's studies have one")
    stored = study.user_attrs.get("synapto")
    if stored is None:
        study.set_user_attr("synapto", identity)
    elif stored != identity:
        diff = ", ".join(k for k in identity if stored.get(k) != identity[k])
        raise UsageError(
            f"study {name!r} was made with another {diff}: give a new --study (or --study-name) for another search"
        )
    return study


def requeue(study, trial) -> None:
    """Enqueue the parameters of an interrupted trial again, with its run folder."""
    attrs = {
        "retry_of": trial.user_attrs.get("retry_of", trial.number),
        "run_dir": trial.user_attrs.get("run_dir", str(trial.number)),
    }
    study.enqueue_trial(dict(trial.params), user_attrs=attrs)


def recover_local(study) -> int:
    """Mark FAIL (and requeue) the RUNNING trials whose process on this host is gone."""
    n = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if token_alive(t.user_attrs.get("host_pid", "")) is False:
            try:
                study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:  # another process recovered it first
                continue
            requeue(study, t)
            n += 1
    return n


def counts(study) -> tuple[int, int]:
    """``(finished, running)`` trials of the study."""
    trials = study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.RUNNING))
    finished = sum(t.state in FINISHED for t in trials)
    return finished, len(trials) - finished


class Surplus(Exception):
    """A trial started when ``--trials`` trials were already finished, running or queued."""


def claim(trial, n_trials: int, sampler_seed: int) -> None:
    """Before ``trial`` samples: end it as surplus (:class:`Surplus`) if ``n_trials`` trials
    come before it; else seed the study's sampler with its sample index."""
    study = trial.study
    before = [t for t in study.get_trials(deepcopy=False) if t.number < trial.number]
    live = (*FINISHED, TrialState.RUNNING, TrialState.WAITING)
    if sum(t.state in live for t in before) >= n_trials:
        trial.set_user_attr("surplus", True)
        raise Surplus(f"trial {trial.number}: {n_trials} trials came before it")
    origin = trial.user_attrs.get("retry_of", trial.number)  # a rerun samples as its first run did
    index = sum(t.number < origin and _sampled(t) for t in before)
    study.sampler = optuna.samplers.TPESampler(seed=seed_for(sampler_seed, index))


def _sampled(t) -> bool:
    """Whether trial ``t`` sampled its own parameters (not a rerun's, not a surplus trial)."""
    return "retry_of" not in t.user_attrs and "surplus" not in t.user_attrs


def run_trials(study, objective, n_trials: int, log) -> None:
    """Add trials until ``n_trials`` are finished (in any process); when the rest are running
    elsewhere, wait for them, rerunning any whose process died."""
    while True:
        recovered = recover_local(study)
        if recovered:
            log(f"{recovered} interrupted trial(s) marked failed and queued to run again")
        finished, running = counts(study)
        if finished >= n_trials:
            return
        if finished + running >= n_trials:  # the last trials run elsewhere: wait for them (or their end)
            optuna.storages.fail_stale_trials(study)
            time.sleep(2.0)
            continue
        try:
            study.optimize(objective, n_trials=1, catch=())
        except Surplus:
            continue
        except KeyboardInterrupt:
            if objective.current is not None:
                t = study._storage.get_trial(objective.current._trial_id)
                if t.state == TrialState.FAIL:
                    requeue(study, t)
            raise


def identity(base: dict, space, seeds, milestones: int, score_episodes: int) -> dict:
    """What a rerun of the same study must give again."""
    return {
        "base": json.loads(json.dumps(base)),
        "space": json.loads(space.to_json()),
        "seeds": list(seeds),
        "milestones": milestones,
        "score_episodes": score_episodes,
    }
