"""One BLAS thread per process.

synapto's matrices are small (a policy's forward pass, a PPO minibatch of a few
thousand rows), and its processes already fill the cores (one worker rank per core).
OpenBLAS's own threads then only get in the way: they wake up for small products and
busy-wait for work, so that on a 2-core machine a BipedalWalker worker ran at half
speed alone and two workers were slower than one (measured in ``bench farm``).  Every
process that evaluates or trains therefore limits BLAS to one thread, through
threadpoolctl (OpenBLAS, MKL, BLIS alike), unless the user chose a thread count with
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` or ``OMP_NUM_THREADS``.

Results can depend on it: full-covariance CMA-ES draws its samples through an
eigendecomposition whose rounding changes with the thread count once the genome has a
few hundred weights (tests/test_blas.py), so a user who sets more threads gets runs of
their own, reproducible at that setting but not equal to synapto's.
"""

from __future__ import annotations

import os

_USER_SETTINGS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS")


def limit_blas_threads(n: int = 1) -> bool:
    """Make the loaded BLAS libraries use ``n`` threads from now on; False if the user set
    a thread count (left alone) or no BLAS library is loaded."""
    if any(k in os.environ for k in _USER_SETTINGS):
        return False
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(p.get("user_api") == "blas" for p in threadpool_info()):
        return False
    threadpool_limits(limits=n, user_api="blas")
    return True
