"""What a PPO run writes to disk (rank 0 only, no collectives): the run file,
Spinning Up's ``progress.txt`` and ``config.json``.

For a run file ``runs/NAME.h5`` the Spinning Up files go in the folder ``runs/NAME/``
(so Spinning Up's plotter and ``pandas.read_table`` read them as they are).

Run file layout (E epochs; same conventions as evolution runs, see
:mod:`synapto.runfile`)::

    /                     attrs: format="synapto-run", format_version=1, kind="ppo",
                          config (JSON of PPOConfig), versions (JSON), created, ranks,
                          obs_dim, act_dim, discrete, n_pi, n_v
    /completed            (1,) int64   epochs fully written
    /stats/<Column>       (E,)  the progress.txt columns except Time (int64 for Epoch and
                          TotalEnvInteracts, float64 otherwise)
    /timing/<name>        (E,) float64 wall-clock seconds, the only non-reproducible data
    /params/epoch_<k>/pi, /v   parameters after epoch k, for k % save_freq == 0
    /params/final/pi, /v       parameters after the last epoch
    /checkpoint/slot0, slot1   {completed, pi, v, pi_adam_m, pi_adam_v, pi_adam_t,
                                v_adam_m, v_adam_v, v_adam_t}

Every dataset exists from the start (parameters not yet reached hold NaN) because the
file is written in HDF5's SWMR mode, which keeps it valid if the writer is killed but
cannot create objects.  After an epoch its rows, parameters and checkpoint are
written and flushed, and only then ``/completed`` is advanced: readers trust
``/completed``.  The checkpoint of ``completed = c`` lives in ``slot{c % 2}``; a slot
is marked invalid (``completed = -1``) while it is rewritten, so the other slot
always holds the previous epoch intact.

``--resume`` copies the first ``completed`` epochs into a fresh file, which then
replaces the old one: an epoch that was half written is dropped, and the resumed
run's file is bit-identical to an uninterrupted run's (``/timing`` aside).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from synapto.errors import RunFileError
from synapto.ppo.config import PPOConfig

PROGRESS_COLUMNS = (
    "Epoch", "AverageEpRet", "StdEpRet", "MaxEpRet", "MinEpRet", "EpLen",
    "AverageVVals", "StdVVals", "MaxVVals", "MinVVals", "TotalEnvInteracts",
    "LossPi", "LossV", "DeltaLossPi", "DeltaLossV", "Entropy", "KL", "ClipFrac", "StopIter", "Time",
)
STATS = PROGRESS_COLUMNS[:-1]
INT_STATS = ("Epoch", "TotalEnvInteracts")
#: per-epoch wall-clock figures of rank 0 (seconds); Time is cumulative since the run started;
#: cpu is the CPU time of rank 0's process during the epoch (wall >> cpu: the machine is shared)
TIMING = ("Time", "epoch", "rollout", "env", "act", "values", "gae", "update", "update_pi", "update_v",
          "comm", "stats", "write", "setup", "cpu")
CHECKPOINT = ("pi", "v", "pi_adam_m", "pi_adam_v", "pi_adam_t", "v_adam_m", "v_adam_v", "v_adam_t")


def log_dir(run_path: str | Path) -> Path:
    """The folder of progress.txt and config.json: the run file's path without ``.h5``."""
    return Path(run_path).with_suffix("")


def saved_epochs(cfg: PPOConfig) -> list[int]:
    """Epochs after which the parameters are kept (Spinning Up's save schedule)."""
    return [k for k in range(cfg.epochs) if k % cfg.save_freq == 0]


def _growing(f, name: str, dtype) -> None:
    f.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(256,), dtype=dtype)


def _nan(f, name: str, n: int) -> None:
    f.create_dataset(name, data=np.full(n, np.nan))


class PPORunWriter:
    """Appends epochs to a PPO run file."""

    def __init__(self, f, cfg: PPOConfig):
        self.f, self.cfg = f, cfg

    @classmethod
    def create(cls, path: Path, cfg: PPOConfig, ranks: int, space, n_pi: int, n_v: int) -> "PPORunWriter":
        from synapto.runfile import new_file

        attrs = {"ranks": ranks, "obs_dim": space.obs_dim, "act_dim": space.act_dim,
                 "discrete": int(space.discrete), "n_pi": n_pi, "n_v": n_v}
        f = new_file(Path(path), "ppo", cfg.to_json(), attrs)
        for name in STATS:
            _growing(f, f"stats/{name}", np.int64 if name in INT_STATS else np.float64)
        for name in TIMING:
            _growing(f, f"timing/{name}", np.float64)
        for group in [f"params/epoch_{k}" for k in saved_epochs(cfg)] + ["params/final"]:
            _nan(f, f"{group}/pi", n_pi)
            _nan(f, f"{group}/v", n_v)
        for slot in ("slot0", "slot1"):
            g = f.create_group(f"checkpoint/{slot}")
            g.create_dataset("completed", data=np.full(1, -1, np.int64))
            for name, n in (("pi", n_pi), ("pi_adam_m", n_pi), ("pi_adam_v", n_pi),
                            ("v", n_v), ("v_adam_m", n_v), ("v_adam_v", n_v)):
                g.create_dataset(name, data=np.full(n, np.nan))
            g.create_dataset("pi_adam_t", data=np.zeros(1, np.int64))
            g.create_dataset("v_adam_t", data=np.zeros(1, np.int64))
        f.flush()
        f.swmr_mode = True
        return cls(f, cfg)

    @property
    def completed(self) -> int:
        return int(self.f["completed"][0])

    def append(self, epoch: int, stats: dict, timing: dict, checkpoint: dict) -> None:
        """Write epoch ``epoch`` (must equal /completed), flush, then advance the counter."""
        f = self.f
        if epoch != self.completed:
            raise RuntimeError(f"appending epoch {epoch} to a file with {self.completed} completed")
        for name in STATS:
            self._put(f"stats/{name}", epoch, stats[name])
        for name in TIMING:
            self._put(f"timing/{name}", epoch, timing.get(name, np.nan))
        if epoch % self.cfg.save_freq == 0:
            f[f"params/epoch_{epoch}/pi"][:] = checkpoint["pi"]
            f[f"params/epoch_{epoch}/v"][:] = checkpoint["v"]
        if epoch == self.cfg.epochs - 1:
            f["params/final/pi"][:] = checkpoint["pi"]
            f["params/final/v"][:] = checkpoint["v"]
        slot = f[f"checkpoint/slot{(epoch + 1) % 2}"]
        slot["completed"][0] = -1
        f.flush()
        for name in CHECKPOINT:
            slot[name][:] = checkpoint[name]
        f.flush()
        slot["completed"][0] = epoch + 1
        f.flush()
        f["completed"][0] = epoch + 1
        f.flush()

    def _put(self, name: str, i: int, value) -> None:
        ds = self.f[name]
        if ds.shape[0] < i + 1:
            ds.resize(i + 1, axis=0)
        ds[i] = value

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()


# ----------------------------------------------------------------------------- reading
class PPORun:
    """A PPO run file read back (validated); a context manager."""

    def __init__(self, path: str | Path):
        from synapto.runfile import open_run

        self.path = Path(path)
        self.f = open_run(self.path, kind="ppo")
        try:
            self.config = PPOConfig.from_json(self.f.attrs["config"])
            self.ranks = int(self.f.attrs["ranks"])
            self.completed = int(self.f["completed"][0])
            self.discrete = bool(self.f.attrs["discrete"])
            self.obs_dim = int(self.f.attrs["obs_dim"])
            self.act_dim = int(self.f.attrs["act_dim"])
        except RunFileError:
            self.f.close()
            raise
        except Exception as exc:
            self.f.close()
            raise RunFileError(f"{str(self.path)!r} is not a valid PPO run file ({exc})") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()

    def stats(self, name: str) -> np.ndarray:
        return self.f[f"stats/{name}"][: self.completed]

    def timing(self, name: str) -> np.ndarray:
        if f"timing/{name}" not in self.f:  # a figure this file's writer did not record
            return np.full(self.completed, np.nan)
        return self.f[f"timing/{name}"][: self.completed]

    def checkpoint(self) -> dict[str, np.ndarray]:
        """The optimiser state after the last completed epoch."""
        slot = self.f[f"checkpoint/slot{self.completed % 2}"]
        if self.completed < 1 or int(slot["completed"][0]) != self.completed:
            raise RunFileError(f"{str(self.path)!r} has no checkpoint of epoch {self.completed} "
                               f"(completed epochs: {self.completed})")
        return {name: slot[name][()] for name in CHECKPOINT}

    def params(self, which: str = "latest") -> tuple[np.ndarray, np.ndarray, str]:
        """``(pi, v, label)`` of ``final``, ``latest`` (final, else the last checkpoint) or an epoch."""
        if which == "latest":
            which = "final" if self.completed == self.config.epochs else "checkpoint"
        if which == "checkpoint":
            ck = self.checkpoint()
            return ck["pi"], ck["v"], f"after epoch {self.completed - 1} (checkpoint)"
        if which == "final":
            if self.completed != self.config.epochs:
                raise RunFileError(f"{str(self.path)!r} is unfinished ({self.completed} of "
                                   f"{self.config.epochs} epochs): no final parameters")
            return self.f["params/final/pi"][()], self.f["params/final/v"][()], "final"
        try:
            k = int(which.removeprefix("epoch_"))
        except ValueError:
            raise RunFileError(f"parameters {which!r}: expected final, latest or an epoch number") from None
        if f"params/epoch_{k}" not in self.f or k >= self.completed:
            kept = [e for e in saved_epochs(self.config) if e < self.completed]
            raise RunFileError(f"{str(self.path)!r} has no parameters of epoch {k}; kept epochs: {kept}")
        return self.f[f"params/epoch_{k}/pi"][()], self.f[f"params/epoch_{k}/v"][()], f"epoch {k}"

    def progress_rows(self) -> list[dict]:
        cols = {name: self.stats(name) for name in STATS}
        cols["Time"] = self.timing("Time")
        return [{name: cols[name][i] for name in PROGRESS_COLUMNS} for i in range(self.completed)]


def prepare_resume(path: Path, cfg: PPOConfig, ranks: int) -> tuple["PPORunWriter", dict, int]:
    """Truncate ``path`` to its completed epochs (via a fresh file + os.replace) and open it
    for appending under ``cfg``.  Returns ``(writer, checkpoint, completed)``."""
    from synapto.runfile import new_file

    with PPORun(path) as run:
        done = run.completed
        ck = run.checkpoint()
        old = run.f
        n_pi, n_v = int(old.attrs["n_pi"]), int(old.attrs["n_v"])
        tmp = path.with_name(path.name + ".resume-tmp")
        attrs = {k: old.attrs[k] for k in ("ranks", "obs_dim", "act_dim", "discrete", "n_pi", "n_v")}
        f = new_file(tmp, "ppo", cfg.to_json(), attrs)
        f.attrs["created"] = old.attrs.get("created", "")
        try:
            for name in STATS:
                data = run.stats(name)
                f.create_dataset(f"stats/{name}", data=data, maxshape=(None,), chunks=(256,))
            for name in TIMING:
                f.create_dataset(f"timing/{name}", data=run.timing(name), maxshape=(None,), chunks=(256,))
            for group in [f"params/epoch_{k}" for k in saved_epochs(cfg)] + ["params/final"]:
                keep = group != "params/final" and int(group.split("_")[-1]) < done
                for net, n in (("pi", n_pi), ("v", n_v)):
                    f.create_dataset(f"{group}/{net}", data=old[f"{group}/{net}"][()] if keep else np.full(n, np.nan))
            for slot in ("slot0", "slot1"):
                src = old[f"checkpoint/{slot}"]
                valid = int(src["completed"][0]) in (done, done - 1)
                g = f.create_group(f"checkpoint/{slot}")
                g.create_dataset("completed", data=src["completed"][()] if valid else np.full(1, -1, np.int64))
                for name in CHECKPOINT:
                    data = src[name][()]
                    g.create_dataset(name, data=data if valid else np.full_like(data, np.nan if
                                                                                  data.dtype.kind == "f" else 0))
            f["completed"][0] = done
            f.flush()
        except BaseException:
            f.close()
            tmp.unlink(missing_ok=True)
            raise
    f.close()
    os.replace(tmp, path)
    import h5py

    f = h5py.File(path, "r+", libver="latest", locking=False)
    f.swmr_mode = True
    return PPORunWriter(f, cfg), ck, done


# ----------------------------------------------------------------------- Spinning Up files
def spinup_config(cfg: PPOConfig, ranks: int) -> dict:
    """config.json with Spinning Up's key names (its plotter reads ``exp_name``) plus ours."""
    return {
        "exp_name": cfg.exp_name,
        "env_name": cfg.env,
        "ac_kwargs": {"hidden_sizes": list(cfg.hid)},
        "seed": cfg.seed,
        "steps_per_epoch": cfg.steps_per_epoch,
        "epochs": cfg.epochs,
        "gamma": cfg.gamma,
        "clip_ratio": cfg.clip_ratio,
        "pi_lr": cfg.pi_lr,
        "vf_lr": cfg.vf_lr,
        "train_pi_iters": cfg.train_pi_iters,
        "train_v_iters": cfg.train_v_iters,
        "lam": cfg.lam,
        "max_ep_len": cfg.max_ep_len,
        "target_kl": cfg.target_kl,
        "save_freq": cfg.save_freq,
        "cpu": ranks,
        "synapto": {**asdict(cfg), "hid": list(cfg.hid), "ranks": ranks},
    }


def _cell(name: str, value) -> str:
    if name in INT_STATS:
        return str(int(value))
    return repr(float(value))


class ProgressWriter:
    """Spinning Up's ``progress.txt`` (tab-separated, header + one row per epoch) and ``config.json``."""

    def __init__(self, folder: Path, cfg: PPOConfig, ranks: int, rows: list[dict] = ()):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(spinup_config(cfg, ranks), indent=4, sort_keys=True) + "\n")
        self.file = open(folder / "progress.txt", "w")
        self.file.write("\t".join(PROGRESS_COLUMNS) + "\n")
        for row in rows:
            self.write(row)

    def write(self, row: dict) -> None:
        self.file.write("\t".join(_cell(name, row[name]) for name in PROGRESS_COLUMNS) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_progress(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a progress.txt (as strings)."""
    lines = Path(path).read_text().splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]
