"""The HDF5 run file: the one module that writes evolution run files.

Written by the coordinator only.  The file is created with every dataset in place
(the per-generation ones empty and resizable along the generation axis), then
switched to HDF5's single-writer/multiple-reader (SWMR) mode, in which the library
orders its metadata flushes so that the file on disk is always a valid HDF5 file
-- also when the writer is killed mid-write -- and can be read while it grows.
After each generation its rows are written and flushed, and only then is the
counter ``/completed`` advanced and flushed.  Readers trust ``/completed``, never
the datasets' lengths: rows past it belong to a generation that did not finish.

Layout (G generations, P individuals, E episodes, n genome length, T test episodes)::

    /                   attrs: format="synapto-run", format_version, kind="evolve",
                        config (JSON), versions (JSON), created (ISO time), n_params
    /completed          (1,)  int64   generations fully written
    /fitness            (G, P) float64  fitness (mean return - penalty; -inf if non-finite)
    /returns            (G, P, E) float64  return of each episode
    /steps              (G, P) int64    env steps of each evaluation
    /seeds              (G, P, E) int64  env.reset seeds of each episode
    /population         (G, P, n) float64  the genomes evaluated (0 = pruned)
    /connections        (G, P) int64    surviving connections
    /nonfinite          (G, P) bool     non-finite action or return
    /failed             (G, P) bool     evaluation raised (``--on-error skip``)
    /validation/...     individual (G, K), fitness (G, K), returns (G, K, V), steps (G, K),
                        seeds (G, V): the top K candidates re-evaluated on V fresh episodes
    /stats/<name>       (G,) float64    per-generation statistics (see STATS)
    /champion/...       genome (n,), fitness, generation, test_seeds (T,),
                        test_returns (T,), test_steps (T,), tested (1 once the run finished)
    /timing/<name>      (G,) float64    wall-clock figures, the only non-reproducible data

Everything outside ``/timing`` is a pure function of the config, so two runs of
the same config are bit-identical there whatever the number of MPI ranks.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from synapto.errors import RunFileError, UsageError

FORMAT = "synapto-run"
FORMAT_VERSION = 1

STATS = (
    "generation", "env_steps", "best_fitness", "best_ever_fitness",
    "pop_mean", "pop_std", "pop_min", "pop_max",
    "elite_mean", "elite_std", "elite_min", "elite_max",
    "connections_mean", "connections_std", "champion_connections", "prune_rate",
    "nonfinite_count", "failure_count", "validation_best", "validation_mean", "validation_env_steps",
)
TIMING = ("wall", "eval_wall", "worker_compute", "worker_env", "worker_agent", "worker_idle", "validation",
          "update", "write")


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("synapto", "numpy", "gymnasium", "h5py", "mpi4py", "box2d"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def check_output_path(path: str | Path, force: bool) -> Path:
    """Refuse to overwrite without ``force``; check the directory is writable."""
    p = Path(path)
    if p.exists() and not force:
        raise UsageError(f"--out {str(p)!r} exists; pass --force to overwrite it")
    if p.exists() and p.is_dir():
        raise UsageError(f"--out {str(p)!r} is a directory, expected a .h5 file path")
    parent = p.parent if str(p.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {str(p)!r}: cannot create directory {str(parent)!r} ({exc.strerror})") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {str(p)!r}: directory {str(parent)!r} is not writable")
    return p


def _h5py():
    import h5py

    return h5py


def open_run(path: str | Path, kind: str | None = None):
    """Open a run file for reading; one-line :class:`RunFileError` if it is not one."""
    h5py = _h5py()
    p = Path(path)
    if not p.exists():
        raise RunFileError(f"{str(p)!r}: no such file")
    if p.is_dir():
        raise RunFileError(f"{str(p)!r} is a directory, expected a synapto run file (.h5)")
    try:
        f = h5py.File(p, "r", swmr=True, locking=False)
    except OSError:
        try:
            f = h5py.File(p, "r", locking=False)
        except OSError as exc:
            raise RunFileError(f"{str(p)!r} is not a readable HDF5 file (truncated or corrupted?): "
                               f"{str(exc).splitlines()[0]}") from None
    try:
        fmt = f.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != FORMAT:
            raise RunFileError(f"{str(p)!r} is an HDF5 file but not a synapto run")
        ver = int(f.attrs.get("format_version", -1))
        if ver != FORMAT_VERSION:
            raise RunFileError(
                f"{str(p)!r} has run-file format version {ver}; this synapto reads version {FORMAT_VERSION}"
            )
        if kind is not None and f.attrs.get("kind") != kind:
            raise RunFileError(f"{str(p)!r} is a {f.attrs.get('kind')!r} run, expected a {kind!r} run")
        if "completed" not in f:
            raise RunFileError(f"{str(p)!r} is truncated or corrupted (no /completed counter)")
        f["completed"][0]
    except RunFileError:
        f.close()
        raise
    except Exception as exc:  # corrupted internals
        f.close()
        raise RunFileError(f"{str(p)!r} is truncated or corrupted ({exc})") from None
    return f


def new_file(path: Path, kind: str, config_json: str, extra_attrs: Mapping | None = None):
    """Create an empty run file with the common root attributes."""
    h5py = _h5py()
    f = h5py.File(path, "w", libver="latest", locking=False)
    f.attrs["format"] = FORMAT
    f.attrs["format_version"] = FORMAT_VERSION
    f.attrs["kind"] = kind
    f.attrs["config"] = config_json
    f.attrs["versions"] = json.dumps(package_versions(), sort_keys=True)
    f.attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for k, v in (extra_attrs or {}).items():
        f.attrs[k] = v
    f.create_dataset("completed", data=np.zeros(1, dtype=np.int64))
    return f


def _growing(f, name, tail_shape, dtype, compression=None):
    # An empty trailing dimension (no validation, say) still needs a non-empty chunk.
    maxshape = (None, *(None if d == 0 else d for d in tail_shape))
    chunks = (1, *(max(d, 1) for d in tail_shape)) if tail_shape else (64,)
    return f.create_dataset(name, shape=(0, *tail_shape), maxshape=maxshape, chunks=chunks, dtype=dtype,
                            compression=compression)


class EvolveRunWriter:
    """Appends generations to an evolution run file (coordinator only)."""

    def __init__(self, f):
        self.f = f

    @classmethod
    def create(cls, path: Path, config, n_params: int, agent_name: str) -> "EvolveRunWriter":
        P, E, T = config.population, config.episodes, config.test_episodes
        f = new_file(path, "evolve", config.to_json(), {"n_params": n_params, "agent_name": agent_name})
        _growing(f, "fitness", (P,), "f8")
        _growing(f, "returns", (P, E), "f8")
        _growing(f, "steps", (P,), "i8")
        _growing(f, "seeds", (P, E), "i8")
        _growing(f, "population", (P, n_params), "f8", compression="lzf")
        _growing(f, "connections", (P,), "i8")
        _growing(f, "nonfinite", (P,), "?")
        _growing(f, "failed", (P,), "?")
        K, V = config.validation_count, config.validate_episodes
        _growing(f, "validation/individual", (K,), "i8")
        _growing(f, "validation/fitness", (K,), "f8")
        _growing(f, "validation/returns", (K, V), "f8")
        _growing(f, "validation/steps", (K,), "i8")
        _growing(f, "validation/seeds", (V,), "i8")
        for name in STATS:
            _growing(f, f"stats/{name}", (), "f8")
        for name in TIMING:
            _growing(f, f"timing/{name}", (), "f8")
        c = f.create_group("champion")
        c.create_dataset("genome", data=np.zeros(n_params))
        c.create_dataset("fitness", data=np.full(1, -np.inf))
        c.create_dataset("generation", data=np.full(1, -1, dtype=np.int64))
        c.create_dataset("test_seeds", data=np.zeros(T, dtype=np.int64))
        c.create_dataset("test_returns", data=np.zeros(T))
        c.create_dataset("test_steps", data=np.zeros(T, dtype=np.int64))
        c.create_dataset("tested", data=np.zeros(1, dtype=np.int64))
        f.flush()
        f.swmr_mode = True
        return cls(f)

    def append(self, g: int, data: Mapping[str, np.ndarray], stats: Mapping[str, float],
               timing: Mapping[str, float]) -> None:
        """Write generation ``g`` (must equal /completed), flush, then advance the counter."""
        f = self.f
        done = int(f["completed"][0])
        if g != done:
            raise RuntimeError(f"appending generation {g} to a file with {done} completed")
        for name, value in data.items():
            self._put(name, g, value)
        for name in STATS:
            self._put(f"stats/{name}", g, stats[name])
        for name in TIMING:
            self._put(f"timing/{name}", g, timing.get(name, np.nan))
        f.flush()
        from synapto import faults

        faults.point("runfile", g)
        f["completed"][0] = g + 1
        f.flush()

    def _put(self, name: str, g: int, value) -> None:
        ds = self.f[name]
        if ds.shape[0] < g + 1:
            ds.resize(g + 1, axis=0)
        ds[g] = value

    def write_champion(self, genome, fitness, generation, seeds, returns, steps) -> None:
        c = self.f["champion"]
        c["genome"][:] = genome
        c["fitness"][0] = fitness
        c["generation"][0] = generation
        c["test_seeds"][:] = seeds
        c["test_returns"][:] = returns
        c["test_steps"][:] = steps
        self.f.flush()
        from synapto import faults

        faults.point("champion", int(self.f["completed"][0]))
        c["tested"][0] = 1  # the run's last step is done
        self.f.flush()

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()


# --------------------------------------------------------------------------- resume
PER_GENERATION = ("fitness", "returns", "steps", "seeds", "population", "connections", "nonfinite", "failed",
                  "validation/individual", "validation/fitness", "validation/returns", "validation/steps",
                  "validation/seeds",
                  *(f"stats/{n}" for n in STATS), *(f"timing/{n}" for n in TIMING))


def rebuild_prefix(path: Path, generations: int, config, n_params: int, agent_name: str) -> "EvolveRunWriter":
    """Replace ``path`` by a fresh run file holding its first ``generations`` rows.

    Rows of a generation that did not finish (and of any generation after the last
    checkpoint) are dropped.  The new file is written beside the old one and
    ``os.replace``-d over it, so a crash here leaves the old file in place.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".resume.tmp")
    with open_run(path, kind="evolve") as old:
        if int(old["completed"][0]) < generations:
            raise RunFileError(f"{str(path)!r} holds {int(old['completed'][0])} generations, "
                               f"fewer than its checkpoint's {generations}")
        rows = {name: old[name][:generations] for name in PER_GENERATION if name in old}
    writer = EvolveRunWriter.create(tmp, config, n_params, agent_name)
    f = writer.f
    for name, data in rows.items():
        if len(data):
            f[name].resize(generations, axis=0)
            f[name][:] = data
    f.flush()
    f["completed"][0] = generations
    f.flush()
    writer.close()
    _fsync(tmp)
    from synapto import faults

    faults.point("rebuild", generations)
    os.replace(tmp, path)
    h5py = _h5py()
    f = h5py.File(path, "r+", libver="latest", locking=False)
    f.swmr_mode = True
    return EvolveRunWriter(f)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_path(run_path: Path) -> Path:
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".ckpt")


@dataclass
class Checkpoint:
    """What a checkpoint holds: named arrays and scalars (the strategy's state and the
    loop's counters), the evolution Generator, and the run's config."""

    arrays: dict[str, np.ndarray]
    scalars: dict[str, int | float]
    rng: np.random.Generator
    config_json: str


def write_checkpoint(run_path: Path, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int | float],
                     rng: np.random.Generator, config_json: str) -> Path:
    """Atomically replace the checkpoint of ``run_path``: ``arrays`` as datasets,
    ``scalars`` as attributes (Python ints and floats), the Generator's state as JSON.

    Written to a temporary file, fsync-ed, then ``os.replace``-d: a crash at any
    instant leaves either the old or the new checkpoint, never a mixture.
    """
    from synapto import faults

    h5py = _h5py()
    final = checkpoint_path(run_path)
    tmp = final.with_name(final.name + ".tmp")
    with h5py.File(tmp, "w", locking=False) as f:
        f.attrs["format"] = FORMAT + "-checkpoint"
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["config"] = config_json
        f.attrs["rng_state"] = json.dumps(rng.bit_generator.state)
        f.attrs["bit_generator"] = type(rng.bit_generator).__name__
        for name, value in scalars.items():
            f.attrs[name] = value
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
        f.flush()
        faults.point("checkpoint", int(scalars["generation"]))
    _fsync(tmp)
    os.replace(tmp, final)
    return final


def read_checkpoint(run_path: Path) -> Checkpoint | None:
    """The checkpoint of ``run_path``, or None if there is none."""
    h5py = _h5py()
    path = checkpoint_path(run_path)
    if not path.exists():
        return None
    reserved = {"format", "format_version", "config", "rng_state", "bit_generator"}
    try:
        with h5py.File(path, "r", locking=False) as f:
            if f.attrs.get("format") != FORMAT + "-checkpoint":
                raise RunFileError(f"{str(path)!r} is not a synapto checkpoint")
            if int(f.attrs.get("format_version", -1)) != FORMAT_VERSION:
                raise RunFileError(f"{str(path)!r} has checkpoint format version "
                                   f"{int(f.attrs.get('format_version', -1))}; expected {FORMAT_VERSION}")
            bitgen = getattr(np.random, str(f.attrs["bit_generator"]))()
            bitgen.state = json.loads(f.attrs["rng_state"])
            arrays = {name: f[name][()] for name in f if isinstance(f[name], h5py.Dataset)}
            scalars = {name: v.item() for name, v in f.attrs.items() if name not in reserved}
            config_json = str(f.attrs["config"])
    except RunFileError:
        raise
    except Exception as exc:
        raise RunFileError(f"checkpoint {str(path)!r} is unreadable ({exc})") from None
    return Checkpoint(arrays, scalars, np.random.Generator(bitgen), config_json)
