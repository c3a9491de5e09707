"""Threads of the PPO update: the update's own two loops (BLAS threads: :mod:`synapto.common.blas`)."""

from __future__ import annotations

import os

from synapto.common.errors import UsageError


def update_threads() -> int:
    """Threads a single-rank update uses: ``$SYNAPTO_PPO_THREADS`` (1 or 2), else 2 when the
    machine has a second core.  Results do not depend on it (:meth:`Trainer.update`)."""
    value = os.environ.get("SYNAPTO_PPO_THREADS", "")
    if value in ("1", "2"):
        return int(value)
    if value:
        raise UsageError(f"SYNAPTO_PPO_THREADS must be 1 or 2, got {value!r}")
    return 2 if (os.cpu_count() or 1) >= 2 else 1
