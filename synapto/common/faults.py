"""Fault-injection points for crash tests.

``SYNAPTO_FAULT=<name>:<generation>`` makes the coordinator print
``FAULT-POINT <name> <generation>`` and sleep at that point, so a test can
``kill -9`` it at a precise moment (e.g. in the middle of writing a checkpoint).
Unset (always, outside tests) it costs one dictionary lookup.

The points: ``generation:G`` (before generation G's evaluations), ``training:G``,
``validation:G`` and ``test:G`` (while that map's evaluations run: after its first
result, see :func:`during`; ``test`` is the champion test, G the run's generation
count), ``runfile:G`` (generation G's rows written, its counter not yet),
``checkpoint:G`` (a checkpoint half written), ``tracking:G`` (generation G's rows and
checkpoint written, its ``--live-log`` / ``--tensorboard`` rows not yet), ``rebuild:G``
(``--resume`` has written the rebuilt run file beside the old one, not yet replaced it)
and ``champion:G`` (the champion's datasets written, its ``tested`` flag not yet).  PPO
runs (rank 0): ``epoch:K`` (before epoch K), ``tracking:K`` (epoch K written, its
tracking rows not yet) and ``test:E`` (the E epochs done, before the final policy's test).
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


def during(name: str, generation: int, progress):
    """``progress`` (a map's ``progress(done, total)`` callback, or None), wrapped so that
    the point ``name:generation`` fires at the map's first result, while the others are
    still being evaluated; ``progress`` itself when that point is not armed."""
    if os.environ.get("SYNAPTO_FAULT") != f"{name}:{generation}":
        return progress

    fired: list[int] = []

    def wrapped(done: int, total: int) -> None:
        if not fired:
            fired.append(done)
            point(name, generation)
        if progress is not None:
            progress(done, total)

    return wrapped
