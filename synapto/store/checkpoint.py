"""The checkpoint beside a run file (``RUN.h5.ckpt``): what a run needs to continue.

Named arrays (datasets) and scalars (attributes, Python ints and floats) -- the
strategy's state and the loop's counters --, the state of a numpy Generator (as
JSON, with its bit generator's name), the run's config and the run's id.  No pickle.

The checkpoint belongs to one run: it carries the ``run_id`` of its run file, and
:func:`read_checkpoint` refuses one whose id differs (another run's checkpoint copied
or left beside this file).  Every array is checksummed (fletcher32) and the metadata
with it (HDF5's own checksums), so a damaged checkpoint is refused with one line
rather than resumed from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.common import faults
from synapto.common.errors import RunFileError
from synapto.store.files import (
    FORMAT,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    check_metadata,
    fixed_dataset,
    h5py,
    write_image,
)
from synapto.store.replace import replace_file

#: attributes of a checkpoint that are not the caller's scalars
RESERVED = {"format", "format_version", "config", "rng_state", "bit_generator", "run_id"}


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
    run_id: str = ""  #: the id of the run it belongs to ("" for a checkpoint of a format before ids)


def write_checkpoint(
    run_path: Path,
    arrays: Mapping[str, np.ndarray],
    scalars: Mapping[str, int | float],
    rng: np.random.Generator,
    config_json: str,
    run_id: str = "",
) -> Path:
    """Atomically replace the checkpoint of ``run_path``: ``arrays`` as checksummed datasets,
    ``scalars`` as attributes (Python ints and floats), the Generator's state as JSON,
    ``run_id`` the id of the run file (see :func:`read_checkpoint`).

    Built in memory, written to a temporary file, fsync-ed, then ``os.replace``-d: a crash
    at any instant leaves either the old or the new checkpoint, never a mixture; a full
    disk raises :class:`~synapto.common.errors.DiskFullError` with the temporary file removed.
    """
    final = checkpoint_path(run_path)
    generation = int(scalars["generation"])

    def fill(f) -> None:
        f.attrs["format"] = FORMAT + "-checkpoint"
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["config"] = config_json
        f.attrs["rng_state"] = json.dumps(rng.bit_generator.state)
        f.attrs["bit_generator"] = type(rng.bit_generator).__name__
        f.attrs["run_id"] = run_id
        for name, value in scalars.items():
            f.attrs[name] = value
        for name, data in arrays.items():
            array = np.asarray(data)
            if array.ndim == 0:  # a 0-d array cannot be chunked (nor checksummed): kept as (1,)
                fixed_dataset(f, name, array.reshape(1)).attrs["scalar"] = 1
            else:
                fixed_dataset(f, name, array)

    def build(tmp: Path) -> None:
        write_image(tmp, fill)  # built in memory, written with plain writes
        faults.point("checkpoint", generation)

    replace_file(final, build, ".tmp", f"writing the checkpoint of generation {generation}")
    return final


def _run_id_of(run_path: Path) -> str:
    """The run id the run file records ("" without one, or without a readable run file)."""
    try:
        with h5py().File(run_path, "r", locking=False) as f:
            return str(f.attrs.get("run_id", ""))
    except Exception:
        return ""


def read_checkpoint(run_path: Path, run_id: str | None = None) -> Checkpoint | None:
    """The checkpoint of ``run_path``, or None if there is none.

    Refused in one line (:class:`RunFileError`): a checkpoint that is not one, of a newer
    format, damaged (checksums), or of another run -- its id differs from ``run_id``
    (default: the id ``run_path`` records; a run file of a format before ids accepts any)."""
    h5 = h5py()
    path = checkpoint_path(run_path)
    if not path.exists():
        return None
    expected = _run_id_of(run_path) if run_id is None else run_id
    try:
        with h5.File(path, "r", locking=False) as f:
            if f.attrs.get("format") != FORMAT + "-checkpoint":
                raise RunFileError(f"{str(path)!r} is not a synapto checkpoint")
            if int(f.attrs.get("format_version", -1)) not in READABLE_VERSIONS:
                raise RunFileError(
                    f"{str(path)!r} has checkpoint format version "
                    f"{int(f.attrs.get('format_version', -1))}; this synapto reads versions "
                    f"{', '.join(map(str, READABLE_VERSIONS))}"
                )
            check_metadata(f, f"checkpoint {str(path)!r}")
            own = str(f.attrs.get("run_id", ""))
            if expected and own != expected:
                raise RunFileError(
                    f"checkpoint {str(path)!r} belongs to another run (run id {own or 'none'}; "
                    f"{str(run_path)!r} is run {expected}): it cannot continue this run"
                )
            bitgen = getattr(np.random, str(f.attrs["bit_generator"]))()
            bitgen.state = json.loads(f.attrs["rng_state"])
            arrays = {}
            for name in f:
                ds = f[name]
                if isinstance(ds, h5.Dataset):
                    arrays[name] = ds[()].reshape(()) if ds.attrs.get("scalar", 0) else ds[()]
            scalars = {name: v.item() for name, v in f.attrs.items() if name not in RESERVED}
            config_json = str(f.attrs["config"])
    except RunFileError:
        raise
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RunFileError(f"checkpoint {str(path)!r} is unreadable or corrupted ({first})") from None
    return Checkpoint(arrays, scalars, np.random.Generator(bitgen), config_json, own)
