"""A race's thresholds: ``--threshold ENV=X[,Y...]``, repeatable, several per task (a
race is read at 280 and at 300 on BipedalWalker-v3); the first of a task's thresholds is
the one its runs table and ratios use."""

from __future__ import annotations

import math

from synapto.bench.compare import THRESHOLDS
from synapto.common.errors import UsageError


def given_thresholds(items: list[str]) -> dict[str, list[float]]:
    """The ``--threshold ENV=X[,Y...]`` items, per task (repeats add to its list)."""
    given: dict[str, list[float]] = {}
    for item in items:
        env, sep, values = item.partition("=")
        try:
            xs = [float(v) for v in values.split(",")]
        except ValueError:
            sep = ""
        if not sep or not env.strip():
            raise UsageError(f"--threshold expects ENV=NUMBER[,NUMBER...], got {item!r}")
        if not all(math.isfinite(x) for x in xs):  # nan is never reached, inf always or never
            raise UsageError(f"--threshold {item!r}: the threshold must be a finite number")
        mine = given.setdefault(env.strip(), [])
        mine += [x for x in xs if x not in mine]
    return given


def parse_thresholds(items: list[str]) -> dict[str, list[float]]:
    """Each task's thresholds: ``bench compare``'s defaults, replaced for a task by the
    ``--threshold`` items naming it."""
    return {**{k: [v] for k, v in THRESHOLDS.items()}, **given_thresholds(items)}
