"""Strategy options: their declaration (:class:`Option`) and every check of their values.

Each strategy declares its options in ``OPTIONS`` (name -> :class:`Option`) and checks
the values of a completed option dict in its ``check_options`` with the functions here,
so that every strategy refuses a bad value with the same one-line
:class:`~synapto.common.errors.UsageError` (exit code 2): unknown names (:func:`complete`),
numbers out of range, non-integers, non-booleans, a population the sampling cannot
use, and the options of a connection budget (:func:`check_target`, the ``prune_to``
options of :mod:`.prune`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from synapto.common.errors import UsageError


@dataclass(frozen=True)
class Option:
    """One documented strategy option."""

    default: Any
    help: str


#: the largest step size, standard deviation or coefficient a strategy accepts: weights
#: past it saturate every tanh, and a few steps more overflow float64 into inf and NaN
MAX_SCALE = 1e6

#: what ``prune_by`` may name (see :mod:`.prune`)
CRITERIA = ("magnitude", "trace", "random")


def complete(strategy: str, declared: Mapping[str, Option], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` completed with the ``declared`` defaults; unknown names are refused."""
    unknown = sorted(set(options) - set(declared))
    if unknown:
        raise UsageError(
            f"strategy {strategy!r} has no option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(declared)) or 'none'}"
        )
    return {**{k: o.default for k, o in declared.items()}, **dict(options)}


def is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def need_positive(name: str, v) -> float:
    if not is_number(v) or not 0 < v <= MAX_SCALE:
        raise UsageError(f"strategy option {name} must be a number in (0, {MAX_SCALE:g}], got {v!r}")
    return float(v)


def need_nonnegative(name: str, v) -> float:
    if not is_number(v) or not 0 <= v <= MAX_SCALE:
        raise UsageError(f"strategy option {name} must be a number in [0, {MAX_SCALE:g}], got {v!r}")
    return float(v)


def need_fraction(name: str, v, closed_high: bool = False) -> float:
    ok = is_number(v) and (0 <= v <= 1 if closed_high else 0 <= v < 1)
    if not ok:
        raise UsageError(f"strategy option {name} must be a number in [0, 1{']' if closed_high else ')'}, got {v!r}")
    return float(v)


def need_bool(name: str, v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise UsageError(f"strategy option {name} must be true or false, got {v!r}")
    return bool(v)


def need_int(name: str, v, low: int = 1) -> int:
    if not is_int(v) or v < low:
        raise UsageError(f"strategy option {name} must be an integer >= {low}, got {v!r}")
    return int(v)


def need_even_population(name: str, population: int, why: str) -> None:
    if population < 2 or population % 2:
        raise UsageError(f"strategy {name!r} needs an even population >= 2 ({why}), got {population}")


def check_target(out: dict[str, Any]) -> dict[str, Any]:
    """Check (and normalise) the connection-budget options (``prune_to``, ``prune_by``,
    ``prune_start``, ``prune_end``) of a completed option dict; one-line errors."""
    f = out["prune_to"]
    if isinstance(f, (bool, np.bool_)) or not isinstance(f, (int, float, np.integer, np.floating)) or not 0 <= f <= 1:
        raise UsageError(f"strategy option prune_to must be a fraction in (0, 1] (0: no target), got {f!r}")
    out["prune_to"] = float(f)
    if out["prune_by"] not in CRITERIA:
        raise UsageError(f"strategy option prune_by must be one of {', '.join(CRITERIA)}, got {out['prune_by']!r}")
    for key, low in (("prune_start", 0), ("prune_end", 1)):
        if not is_int(out[key]) or out[key] < low:
            raise UsageError(f"strategy option {key} must be an integer >= {low}, got {out[key]!r}")
        out[key] = int(out[key])
    if out["prune_end"] <= out["prune_start"]:
        raise UsageError(
            f"strategy option prune_end ({out['prune_end']}) must be after prune_start ({out['prune_start']})"
        )
    if out["prune_to"] > 0 and out.get("prune") is False:
        raise UsageError(f"strategy option prune_to {out['prune_to']:g} needs pruning on (got prune = false)")
    return out


__all__ = [
    "CRITERIA",
    "MAX_SCALE",
    "Option",
    "check_target",
    "complete",
    "is_int",
    "is_number",
    "need_bool",
    "need_even_population",
    "need_fraction",
    "need_int",
    "need_nonnegative",
    "need_positive",
]
