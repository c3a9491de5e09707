"""The PPO run file: written by rank 0 only (no collectives).

Layout (E epochs; same conventions as evolution runs, see :mod:`synapto.store.evolve`)::

    /                     attrs: format="synapto-run", format_version, kind="ppo",
                          config (JSON of PPOConfig), versions (JSON), created, run_id, ranks,
                          obs_dim, act_dim, discrete, n_pi, n_v
    /completed            (1,) int64   epochs fully written
    /stats/<Column>       (E,)  the progress.txt columns except Time (int64 for Epoch and
                          TotalEnvInteracts, float64 otherwise)
    /timing/<name>        (E,) float64 wall-clock seconds, the only non-reproducible data
    /params/epoch_<k>/pi, /v   parameters after epoch k, for k % save_freq == 0
    /params/final/pi, /v       parameters after the last epoch
    /checkpoint/slot0, slot1   {completed, pi, v, pi_adam_m, pi_adam_v, pi_adam_t,
                                v_adam_m, v_adam_v, v_adam_t}; obs_moments (1 + 2 obs_dim,) with
                                ``obs_norm``, ret_moments (3,) with ``reward_scale``
                                (synapto.ppo.normalise: count, sums, sums of squares)
    /obs_norm/mean, std   (E, obs_dim) with ``obs_norm``: the normalisation the policy after
                          epoch k is tested with
    /test/seeds, returns, steps, tested   with ``test_episodes``: the final policy's test on
                          the PPO_TEST stream (tested = 1 once written)
    /test/outcomes, action_cost   each test episode's outcome (int8) and action magnitude
                          (:mod:`synapto.outcomes`; absent from files written before them)

The file is created whole (built beside its path, fsync-ed, renamed into place) with
every dataset at its final size -- one row (chunk) per epoch, parameters not yet reached
hold NaN --, so writing an epoch only overwrites raw data in place and a writer killed
at any instant leaves a file every HDF5 reader opens (see :mod:`synapto.store.files`).
After an epoch its rows, parameters and checkpoint are written and flushed, and only
then ``/completed`` is advanced: readers trust ``/completed``.  The checkpoint of
``completed = c`` lives in ``slot{c % 2}``; a slot is marked invalid (``completed = -1``)
while it is rewritten, so the other slot always holds the previous epoch intact.

``--resume`` copies the first ``completed`` epochs (not the test: it runs again at the end)
into a fresh file, which then
replaces the old one (:func:`synapto.store.files.rewrite`): an epoch that was half
written is dropped, and the resumed run's file is bit-identical to an uninterrupted
run's (``/timing`` aside).

The writer takes the run's config as an object with ``epochs``, ``save_freq`` and
``to_json()`` (:class:`synapto.ppo.config.PPOConfig`), and the spaces as an object
with ``obs_dim``, ``act_dim`` and ``discrete``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from synapto.common.errors import RunFileError, UsageError
from synapto.store.files import build_file, filling, open_append, open_run, put_row, writing
from synapto.store.replace import replace_file, rewrite

#: Spinning Up's progress.txt columns, in its order; the run file keeps all but Time under /stats
PROGRESS_COLUMNS = (
    "Epoch",
    "AverageEpRet",
    "StdEpRet",
    "MaxEpRet",
    "MinEpRet",
    "EpLen",
    "AverageVVals",
    "StdVVals",
    "MaxVVals",
    "MinVVals",
    "TotalEnvInteracts",
    "LossPi",
    "LossV",
    "DeltaLossPi",
    "DeltaLossV",
    "Entropy",
    "KL",
    "ClipFrac",
    "StopIter",
    "Time",
)
STATS = PROGRESS_COLUMNS[:-1]
INT_STATS = ("Epoch", "TotalEnvInteracts")
#: per-epoch wall-clock figures of rank 0 (seconds); Time is cumulative since the run started;
#: cpu is the CPU time of rank 0's process during the epoch (wall >> cpu: the machine is shared)
TIMING = (
    "Time",
    "epoch",
    "rollout",
    "env",
    "act",
    "values",
    "gae",
    "update",
    "update_pi",
    "update_v",
    "comm",
    "stats",
    "write",
    "setup",
    "cpu",
)
CHECKPOINT = ("pi", "v", "pi_adam_m", "pi_adam_v", "pi_adam_t", "v_adam_m", "v_adam_v", "v_adam_t")
#: root attributes of a PPO run besides the common ones
ATTRS = ("ranks", "obs_dim", "act_dim", "discrete", "n_pi", "n_v")


def norm_checkpoint(cfg, obs_dim: int) -> dict[str, int]:
    """The normalisation moments a checkpoint holds besides CHECKPOINT, and their sizes."""
    out = {}
    if getattr(cfg, "obs_norm", False):
        out["obs_moments"] = 1 + 2 * obs_dim
    if getattr(cfg, "reward_scale", False):
        out["ret_moments"] = 3
    return out


def checkpoint_names(cfg, obs_dim: int) -> tuple[str, ...]:
    return (*CHECKPOINT, *norm_checkpoint(cfg, obs_dim))


def saved_epochs(epochs: int, save_freq: int) -> list[int]:
    """Epochs after which the parameters are kept (Spinning Up's save schedule)."""
    return [k for k in range(epochs) if k % save_freq == 0]


def _param_groups(cfg) -> list[str]:
    return [f"params/epoch_{k}" for k in saved_epochs(cfg.epochs, cfg.save_freq)] + ["params/final"]


def _layout(cfg, n_pi: int, n_v: int, obs_dim: int) -> tuple[list, list]:
    """``(name, rows, tail, dtype)`` per-epoch datasets and ``(name, data, checksum)`` fixed ones."""
    rows: list[tuple[str, int, tuple[int, ...], type]]
    rows = [(f"stats/{name}", cfg.epochs, (), np.int64 if name in INT_STATS else np.float64) for name in STATS]
    rows += [(f"timing/{name}", cfg.epochs, (), np.float64) for name in TIMING]
    if getattr(cfg, "obs_norm", False):
        rows += [
            ("obs_norm/mean", cfg.epochs, (obs_dim,), np.float64),
            ("obs_norm/std", cfg.epochs, (obs_dim,), np.float64),
        ]
    fixed: list[tuple[str, np.ndarray, bool]] = []
    for group in _param_groups(cfg):
        fixed += [(f"{group}/pi", np.full(n_pi, np.nan), True), (f"{group}/v", np.full(n_v, np.nan), True)]
    for slot in ("slot0", "slot1"):
        fixed.append((f"checkpoint/{slot}/completed", np.full(1, -1, np.int64), False))
        for net, n in (("pi", n_pi), ("v", n_v)):
            fixed += [
                (f"checkpoint/{slot}/{net}{part}", np.full(n, np.nan), True) for part in ("", "_adam_m", "_adam_v")
            ]
        fixed += [
            (f"checkpoint/{slot}/pi_adam_t", np.zeros(1, np.int64), True),
            (f"checkpoint/{slot}/v_adam_t", np.zeros(1, np.int64), True),
        ]
        fixed += [
            (f"checkpoint/{slot}/{name}", np.full(n, np.nan), True) for name, n in norm_checkpoint(cfg, obs_dim).items()
        ]
    tests = int(getattr(cfg, "test_episodes", 0))
    if tests:
        fixed += [
            ("test/seeds", np.zeros(tests, np.int64), True),
            ("test/returns", np.full(tests, np.nan), True),
            ("test/steps", np.zeros(tests, np.int64), True),
            ("test/outcomes", np.full(tests, -1, np.int8), True),
            ("test/action_cost", np.full(tests, np.nan), True),
            ("test/tested", np.zeros(1, np.int64), False),
        ]
    return rows, fixed


def _build(path: Path, cfg, attrs: dict, n_pi: int, n_v: int, run_id: str | None = None):
    """A new PPO run file at ``path``, open: every dataset at its final size, nothing done;
    its disk space reserved first (see :func:`synapto.store.files.create_file`)."""
    layout = _layout(cfg, n_pi, n_v, int(attrs["obs_dim"]))
    return build_file(path, "ppo", cfg.to_json(), attrs, layout, run_id=run_id)


class PPORunWriter:
    """Appends epochs to a PPO run file."""

    def __init__(self, f, cfg):
        self.f, self.cfg = f, cfg
        self.names = checkpoint_names(cfg, int(f.attrs["obs_dim"]))

    @classmethod
    def create(cls, path: Path, cfg, ranks: int, space, n_pi: int, n_v: int, overwrite: bool = True) -> PPORunWriter:
        """Create the run file ``path`` whole (built beside it, renamed into place) and open
        it for appending; an existing file is refused unless ``overwrite``."""
        path = Path(path)
        if path.exists() and not overwrite:
            raise UsageError(f"--out {str(path)!r} exists; pass --force to overwrite it")
        attrs = dict(
            ranks=ranks, obs_dim=space.obs_dim, act_dim=space.act_dim, discrete=int(space.discrete), n_pi=n_pi, n_v=n_v
        )
        replace_file(path, lambda tmp: _build(tmp, cfg, attrs, n_pi, n_v).close(), ".new.tmp", "creating the run file")
        return cls(open_append(path), cfg)

    @property
    def completed(self) -> int:
        return int(self.f["completed"][0])

    def append(self, epoch: int, stats: dict, timing: dict, checkpoint: dict, norm=None) -> None:
        """Write epoch ``epoch`` (must equal /completed), flush, then advance the counter;
        ``norm``: the observation normalisation ``(mean, std)`` after it (``obs_norm``)."""
        f = self.f
        if epoch != self.completed:
            raise RuntimeError(f"appending epoch {epoch} to a file with {self.completed} completed")
        for name in STATS:
            put_row(f, f"stats/{name}", epoch, stats[name])
        for name in TIMING:
            put_row(f, f"timing/{name}", epoch, timing.get(name, np.nan))
        if "obs_norm/mean" in f:
            put_row(f, "obs_norm/mean", epoch, norm[0])
            put_row(f, "obs_norm/std", epoch, norm[1])
        if epoch % self.cfg.save_freq == 0:
            f[f"params/epoch_{epoch}/pi"][:] = checkpoint["pi"]
            f[f"params/epoch_{epoch}/v"][:] = checkpoint["v"]
        if epoch == self.cfg.epochs - 1:
            f["params/final/pi"][:] = checkpoint["pi"]
            f["params/final/v"][:] = checkpoint["v"]
        slot = f[f"checkpoint/slot{(epoch + 1) % 2}"]
        slot["completed"][0] = -1
        f.flush()
        for name in self.names:
            slot[name][:] = checkpoint[name]
        f.flush()
        slot["completed"][0] = epoch + 1
        f.flush()
        f["completed"][0] = epoch + 1
        f.flush()

    def figures(self, epoch: int) -> tuple[dict[str, float], dict[str, float]]:
        """Epoch ``epoch``'s ``/stats`` and ``/timing`` rows by name: what its tracking rows
        hold, written again on resume."""
        f = self.f
        return {k: float(f[f"stats/{k}"][epoch]) for k in STATS}, {k: float(f[f"timing/{k}"][epoch]) for k in TIMING}

    def write_test(self, seeds, returns, steps, outcomes=None, action_cost=None) -> None:
        """The final policy's test episodes (``test_episodes``; ``outcomes``, ``action_cost``:
        see :mod:`synapto.outcomes`), then ``/test/tested``."""
        f = self.f
        f["test/seeds"][:] = seeds
        f["test/returns"][:] = returns
        f["test/steps"][:] = steps
        if outcomes is not None:
            f["test/outcomes"][:] = outcomes
            f["test/action_cost"][:] = action_cost
        f.flush()
        f["test/tested"][0] = 1
        f.flush()

    def set_timing(self, epoch: int, name: str, value: float) -> None:
        """Overwrite one ``/timing`` figure of an appended epoch (e.g. the time the append
        itself took); it reaches the disk with the next flush."""
        self.f[f"timing/{name}"][epoch] = value

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()


# ----------------------------------------------------------------------------- reading
def read_checkpoint_slot(f, completed: int, path: Path) -> dict[str, np.ndarray]:
    """The optimiser state after epoch ``completed - 1`` (slot ``completed % 2`` of ``f``),
    with the normalisation moments when the run has them."""
    slot = f[f"checkpoint/slot{completed % 2}"]
    if completed < 1 or int(slot["completed"][0]) != completed:
        raise RunFileError(f"{str(path)!r} has no checkpoint of epoch {completed} (completed epochs: {completed})")
    return {name: slot[name][()] for name in (*CHECKPOINT, "obs_moments", "ret_moments") if name in slot}


def read_params(
    f, completed: int, epochs: int, save_freq: int, which: str, path: Path
) -> tuple[np.ndarray, np.ndarray, str]:
    """``(pi, v, label)`` of ``final``, ``latest`` (final, else the last checkpoint) or an epoch."""
    if which == "latest":
        which = "final" if completed == epochs else "checkpoint"
    if which == "checkpoint":
        ck = read_checkpoint_slot(f, completed, path)
        return ck["pi"], ck["v"], f"after epoch {completed - 1} (checkpoint)"
    if which == "final":
        if completed != epochs:
            raise RunFileError(f"{str(path)!r} is unfinished ({completed} of {epochs} epochs): no final parameters")
        return f["params/final/pi"][()], f["params/final/v"][()], "final"
    try:
        k = int(which.removeprefix("epoch_"))
    except ValueError:
        raise RunFileError(f"parameters {which!r}: expected final, latest or an epoch number") from None
    if f"params/epoch_{k}" not in f or k >= completed:
        kept = [e for e in saved_epochs(epochs, save_freq) if e < completed]
        raise RunFileError(f"{str(path)!r} has no parameters of epoch {k}; kept epochs: {kept}")
    return f[f"params/epoch_{k}/pi"][()], f[f"params/epoch_{k}/v"][()], f"epoch {k}"


# ----------------------------------------------------------------------------- resume
def _kept_params(old, cfg, done: int) -> dict[str, np.ndarray]:
    """The kept parameters of the first ``done`` epochs of ``old``, by dataset name."""
    params = {}
    for group in _param_groups(cfg):
        # the final parameters only of a run resumed for its final test (all epochs done)
        if (group == "params/final" and done == cfg.epochs) or (
            group != "params/final" and int(group.split("_")[-1]) < done
        ):
            for net in ("pi", "v"):
                params[f"{group}/{net}"] = old[f"{group}/{net}"][()]
    return params


def _kept_slots(old, names, done: int) -> dict[str, dict]:
    """The checkpoint slots of epochs ``done`` and ``done - 1`` of ``old``, with their ``completed``."""
    slots = {}
    for slot in ("slot0", "slot1"):
        src = old[f"checkpoint/{slot}"]
        n = int(src["completed"][0])
        if n in (done, done - 1) and n >= 1:  # the other slot may be mid-rewrite: never read it
            slots[slot] = {"completed": n, **{name: src[name][()] for name in names}}
    return slots


def prepare_resume(path: Path, cfg, ranks: int) -> tuple[PPORunWriter, dict, int]:
    """Truncate ``path`` to its completed epochs (a fresh file, fsync-ed and ``os.replace``-d
    over it) and open it for appending under ``cfg``.  Returns ``(writer, checkpoint, completed)``."""
    path = Path(path)
    with open_run(path, kind="ppo") as old:
        try:
            done = int(old["completed"][0])
            checkpoint = read_checkpoint_slot(old, done, path)
            attrs = {k: old.attrs[k] for k in ATTRS}
            n_pi, n_v = int(old.attrs["n_pi"]), int(old.attrs["n_v"])
            run_id, created = str(old.attrs.get("run_id", "")), old.attrs.get("created", "")
            stats = {name: old[f"stats/{name}"][:done] for name in STATS}
            for name in ("obs_norm/mean", "obs_norm/std"):
                if name in old:
                    stats[name] = old[name][:done]
            names = checkpoint_names(cfg, int(old.attrs["obs_dim"]))
            timing = {
                name: old[f"timing/{name}"][:done] if f"timing/{name}" in old else np.full(done, np.nan)
                for name in TIMING
            }
            params = _kept_params(old, cfg, done)
            slots = _kept_slots(old, names, done)
        except RunFileError:
            raise
        except Exception as exc:
            raise RunFileError(f"{str(path)!r} is corrupted ({str(exc).splitlines()[0]})") from None

    def write(tmp: Path) -> None:
        with filling(_build(tmp, cfg, attrs, n_pi, n_v, run_id=run_id), tmp) as f:
            if created:
                f.attrs["created"] = created
            for name, data in stats.items():
                f[name if "/" in name else f"stats/{name}"][:done] = data
            for name, data in timing.items():
                f[f"timing/{name}"][:done] = data
            for name, data in params.items():
                f[name][:] = data
            for slot, values in slots.items():
                g = f[f"checkpoint/{slot}"]
                for name in names:
                    g[name][:] = values[name]
                f.flush()
                g["completed"][0] = values["completed"]
            f.flush()
            f["completed"][0] = done
            f.flush()

    with writing(path, "rebuilding it to resume"):
        f = rewrite(path, write)
    return PPORunWriter(f, cfg), checkpoint, done
