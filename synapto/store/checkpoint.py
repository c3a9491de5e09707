"""The checkpoint beside a run file (``RUN.h5.ckpt``): what a run needs to continue.

Named arrays (datasets) and scalars (attributes, Python ints and floats) -- the
strategy's state and the loop's counters --, the state of a numpy Generator (as
JSON, with its bit generator's name) and the run's config.  No pickle.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from synapto.errors import RunFileError
from synapto.store.files import FORMAT, FORMAT_VERSION, READABLE_VERSIONS, fsync, h5py


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

    final = checkpoint_path(run_path)
    tmp = final.with_name(final.name + ".tmp")
    with h5py().File(tmp, "w", locking=False) as f:
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
    fsync(tmp)
    os.replace(tmp, final)
    return final


def read_checkpoint(run_path: Path) -> Checkpoint | None:
    """The checkpoint of ``run_path``, or None if there is none."""
    h5 = h5py()
    path = checkpoint_path(run_path)
    if not path.exists():
        return None
    reserved = {"format", "format_version", "config", "rng_state", "bit_generator"}
    try:
        with h5.File(path, "r", locking=False) as f:
            if f.attrs.get("format") != FORMAT + "-checkpoint":
                raise RunFileError(f"{str(path)!r} is not a synapto checkpoint")
            if int(f.attrs.get("format_version", -1)) not in READABLE_VERSIONS:
                raise RunFileError(f"{str(path)!r} has checkpoint format version "
                                   f"{int(f.attrs.get('format_version', -1))}; this synapto reads versions "
                                   f"{', '.join(map(str, READABLE_VERSIONS))}")
            bitgen = getattr(np.random, str(f.attrs["bit_generator"]))()
            bitgen.state = json.loads(f.attrs["rng_state"])
            arrays = {name: f[name][()] for name in f if isinstance(f[name], h5.Dataset)}
            scalars = {name: v.item() for name, v in f.attrs.items() if name not in reserved}
            config_json = str(f.attrs["config"])
    except RunFileError:
        raise
    except Exception as exc:
        raise RunFileError(f"checkpoint {str(path)!r} is unreadable ({exc})") from None
    return Checkpoint(arrays, scalars, np.random.Generator(bitgen), config_json)
