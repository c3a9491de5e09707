"""The study in its database, and the loop that adds trials to it until ``--trials`` finished.

Storage: ``--study FILE.db`` is SQLite through Optuna's RDB storage (``sqlite:///FILE.db``);
any URL Optuna accepts (``postgresql://...``, ``mysql://...``) is used as given.  Several
``tune`` processes (on one machine, or Slurm jobs on many sharing a database server or a
SQLite file on a file system with working locks) given the same command share the study:
each asks Optuna for the next trial, and each stops when ``--trials`` trials are finished
(waiting for the last ones, which run elsewhere, and rerunning any whose process died).

Crashes.  Every trial records its process (``host:pid:start time``) and beats a heartbeat
into the database.  A trial left RUNNING by a process that is gone -- found at once on the
same host, or through a heartbeat older than the grace period on another -- is marked
FAIL and its parameters are enqueued again (with its run folder), so the next free process
reruns it: finished trials are kept, nothing is counted twice.  The sampler is reseeded
before each trial from (``--sampler-seed``, number of finished trials)
(:func:`synapto.seeding.sampler_seed`), so a study that was killed and continued samples
what an uninterrupted one samples; Hyperband's brackets depend on trial numbers, which a
rerun trial shifts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from synapto.errors import UsageError
from synapto.tune.process import token_alive

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
PRUNERS = ("median", "halving", "hyperband", "none")


def storage_url(study: str) -> str:
    """``--study``: a URL as given, else a SQLite file."""
    if "://" in study:
        return study
    return f"sqlite:///{Path(study).resolve()}"


def open_storage(study: str, heartbeat: int = 60):
    """Optuna's RDB storage of ``--study``, with heartbeats and the requeue of stale trials."""
    import inspect
    import warnings

    from optuna.storages import RDBStorage

    stale = (
        "heartbeat_stale_trial_callback"
        if "heartbeat_stale_trial_callback" in inspect.signature(RDBStorage).parameters
        else "failed_trial_callback"
    )  # the name before Optuna 4.9
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    callback: dict[str, Any] = {stale: requeue}
    for attempt in range(5):
        try:
            return RDBStorage(storage_url(study), heartbeat_interval=heartbeat, grace_period=2 * heartbeat, **callback)
        except Exception as exc:  # a URL Optuna cannot open: a bad scheme, host or file
            if "already exists" in str(exc) and attempt < 4:  # another process is making the same tables
                time.sleep(0.5 * (attempt + 1))
                continue
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise UsageError(
                f"--study {study!r} cannot be opened as a study database ({type(exc).__name__}: {first})"
            ) from None


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


def run_trials(study, objective, n_trials: int, sampler_seed: int, log) -> None:
    """Add trials until ``n_trials`` are finished (in any process); when the rest are running
    elsewhere, wait for them, rerunning any whose process died."""
    from synapto.seeding import sampler_seed as seed_for

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
        study.sampler = optuna.samplers.TPESampler(seed=seed_for(sampler_seed, finished))
        try:
            study.optimize(objective, n_trials=1, catch=())
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
