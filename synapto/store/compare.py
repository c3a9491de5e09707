"""Comparing two run files: identical outside ``/timing``?

Everything a run file holds outside ``/timing`` is a pure function of the run's
config, whatever the number of processes or the resumes; this is the one check of
that promise (the tests and ``bench evolve`` use it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from synapto.store.files import h5py


def datasets(path: str | Path, skip=("timing",)) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file except those under the top-level groups ``skip``."""
    h5 = h5py()
    out = {}
    with h5.File(path, "r", locking=False) as f:

        def visit(name, obj):
            if isinstance(obj, h5.Dataset) and name.split("/")[0] not in skip:
                out[name] = obj[()]

        f.visititems(visit)
    return out


def differences(a: str | Path, b: str | Path, skip=("timing",)) -> list[str]:
    """Datasets (outside ``skip``) that differ between two files in presence, dtype, shape
    or bytes, sorted; ``[]`` if they are bit-identical."""
    da, db = datasets(a, skip), datasets(b, skip)
    names = sorted(set(da) | set(db))
    return [
        k
        for k in names
        if k not in da
        or k not in db
        or da[k].dtype != db[k].dtype
        or da[k].shape != db[k].shape
        or da[k].tobytes() != db[k].tobytes()
    ]
