"""Fault-injection points for crash tests.

``SYNAPTO_FAULT=<name>:<generation>`` makes the coordinator print
``FAULT-POINT <name> <generation>`` and sleep at that point, so a test can
``kill -9`` it at a precise moment (e.g. in the middle of writing a checkpoint).
Unset (always, outside tests) it costs one dictionary lookup.
"""

from __future__ import annotations

import os
import sys
import time


def point(name: str, generation: int) -> None:
    want = os.environ.get("SYNAPTO_FAULT")
    if want and want == f"{name}:{generation}":
        sys.stdout.write(f"FAULT-POINT {name} {generation}\n")
        sys.stdout.flush()
        time.sleep(120)
