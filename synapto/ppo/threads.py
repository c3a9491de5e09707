"""Threads of the PPO update: OpenBLAS's thread count, and the update's own two loops."""

from __future__ import annotations

import ctypes
import os

from synapto.errors import UsageError


def limit_blas_threads(n: int = 1) -> bool:
    """Make an already loaded OpenBLAS use ``n`` threads (best effort; True if done).

    The update's matrices are small: on a 2-core machine OpenBLAS's threads make a
    4000 x 32 matrix product 4x *slower*, and with one MPI rank per core they fight
    over the cores.  Skipped if the user set ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS``.
    """
    if "OPENBLAS_NUM_THREADS" in os.environ or "OMP_NUM_THREADS" in os.environ:
        return False
    try:
        with open("/proc/self/maps") as maps:
            libs = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return False
    done = False
    for lib in libs:
        try:
            handle = ctypes.CDLL(lib)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                       "openblas_set_num_threads64_", "openblas_set_num_threads"):
            fn = getattr(handle, symbol, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                done = True
                break
    return done


def update_threads() -> int:
    """Threads a single-rank update uses: ``$SYNAPTO_PPO_THREADS`` (1 or 2), else 2 when the
    machine has a second core.  Results do not depend on it (:meth:`Trainer.update`)."""
    value = os.environ.get("SYNAPTO_PPO_THREADS", "")
    if value in ("1", "2"):
        return int(value)
    if value:
        raise UsageError(f"SYNAPTO_PPO_THREADS must be 1 or 2, got {value!r}")
    return 2 if (os.cpu_count() or 1) >= 2 else 1
