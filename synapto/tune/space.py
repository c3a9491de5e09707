"""The search space file (``tune --space SPACE.toml``).

::

    # seeds that score the chosen setting: tune refuses to tune on them
    benchmark_seeds = [1, 2, 3, 4, 5]

    [params]
    lr = { log_uniform = [0.001, 0.3] }          # a float, uniform in log(value)
    sigma = { uniform = [0.02, 0.3] }             # a float, uniform
    population = { int = [16, 64], step = 16 }   # an integer (log = true: uniform in log)
    hidden = { choices = [[8], [16], [16, 16]] }  # one of a list (any TOML values)
    "strategy_options.init_std" = { log_uniform = [0.01, 1.0] }
    "env_options.max_episode_steps" = { choices = [500, 1000] }

A name is a run option of ``evolve`` (a base config's key) or ``strategy_options.KEY``,
``agent_options.KEY``, ``env_options.KEY`` (also written as ``[params.strategy_options]``
tables).  Every bound and choice is checked against the base config before the study
starts (:func:`check_space`): an unknown option, bad bounds or a value of the wrong type is
one line, exit 2.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from synapto.common.config import tomllib
from synapto.common.errors import UsageError
from synapto.evolution.run_options import STRATEGY_SHORTHANDS
from synapto.tune.base import NOT_TUNED, TABLES, checked_config, tunable_names, with_params

KINDS = ("uniform", "log_uniform", "int", "choices")
SPACE_KEYS = ("benchmark_seeds", "params")
#: an integer range's values checked from each end before the study (all of a range this short)
CHECKED_NEIGHBOURS = 4


@dataclass(frozen=True)
class Param:
    """One sampled option: its name, kind and bounds (or choices)."""

    name: str
    kind: str  #: one of :data:`KINDS`
    low: float | int | None = None
    high: float | int | None = None
    step: int = 1  #: ``int`` only
    log: bool = False  #: ``int`` only (``log_uniform`` is always log)
    choices: tuple = ()  #: ``choices`` only, as given

    def corners(self) -> list:
        """The values checked before the study: every choice; both bounds of a float, as the
        floats the sampler gives; an integer's bounds and the values next to them (every value
        of a short range), so that a rule such as an even population is met inside too."""
        if self.kind == "choices" or self.low is None or self.high is None:
            return list(self.choices)
        if self.kind != "int":
            return [float(self.low), float(self.high)]
        low, high, step = int(self.low), int(self.high), self.step
        n = (high - low) // step + 1
        if n <= 2 * CHECKED_NEIGHBOURS:
            return list(range(low, high + 1, step))
        near = range(CHECKED_NEIGHBOURS)
        return [low + i * step for i in near] + [high - i * step for i in reversed(near)]

    def suggest(self, trial) -> Any:
        """The value an Optuna trial samples (choices that are not plain scalars travel as
        JSON text, which Optuna's categorical distribution can hold)."""
        if self.kind == "uniform":
            return trial.suggest_float(self.name, self.low, self.high)
        if self.kind == "log_uniform":
            return trial.suggest_float(self.name, self.low, self.high, log=True)
        if self.kind == "int":
            return trial.suggest_int(self.name, self.low, self.high, step=self.step, log=self.log)
        return self.decode(trial.suggest_categorical(self.name, [self.encode(c) for c in self.choices]))

    def encode(self, value):
        return value if self._scalar_choices() else json.dumps(value)

    def decode(self, value):
        return value if self._scalar_choices() else json.loads(value)

    def _scalar_choices(self) -> bool:
        return all(c is None or isinstance(c, (bool, int, float, str)) for c in self.choices)


@dataclass(frozen=True)
class Space:
    """A parsed space file."""

    path: str
    params: tuple[Param, ...]
    benchmark_seeds: tuple[int, ...]

    def suggest(self, trial) -> dict[str, Any]:
        return {p.name: p.suggest(trial) for p in self.params}

    def to_json(self) -> str:
        """What identifies the space in a study (its parameters and benchmark seeds)."""
        return json.dumps(
            {
                "params": [p.__dict__ | {"choices": list(p.choices)} for p in self.params],
                "benchmark_seeds": list(self.benchmark_seeds),
            },
            sort_keys=True,
        )


def find_space(path: str | Path) -> Path:
    """A space file, or the name of a shipped one (``cartpole``: synapto/experiments/spaces/)."""
    p = Path(path)
    if p.exists() or len(p.parts) != 1:
        return p
    folder = Path(str(resources.files("synapto") / "experiments" / "spaces"))
    shipped = folder / (p.name if p.suffix == ".toml" else f"{p.name}.toml")
    return shipped if shipped.exists() else p


def load_space(path: str | Path) -> Space:
    """Parse a space file (one-line :class:`UsageError` for anything wrong in it)."""
    p = find_space(path)
    where = f"--space {str(p)!r}"
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where} is not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    except OSError as exc:
        raise UsageError(f"{where} cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where} does not parse as TOML ({exc})") from None
    raw = {k.replace("-", "_"): v for k, v in raw.items()}
    unknown = sorted(set(raw) - set(SPACE_KEYS))
    if unknown:
        raise UsageError(f"{where} has unknown key(s) {', '.join(unknown)}; known: {', '.join(SPACE_KEYS)}")
    seeds = raw.get("benchmark_seeds", [])
    if not isinstance(seeds, list) or not all(_integer(s) and s >= 0 for s in seeds):
        raise UsageError(f"{where}: benchmark_seeds must be a list of integers >= 0, got {seeds!r}")
    table = raw.get("params")
    if not isinstance(table, dict) or not table:
        raise UsageError(f"{where} needs a [params] table naming at least one option to sample")
    params = tuple(_param(name, spec, where) for name, spec in _flatten(table, where))
    _refuse_aliases(params, where)
    return Space(str(p), params, tuple(seeds))


def option_of(name: str) -> str:
    """The option a sampled name sets: a strategy shorthand (``lr``) is ``strategy_options.lr``."""
    return f"strategy_options.{name}" if name in STRATEGY_SHORTHANDS else name


def _refuse_aliases(params, where: str) -> None:
    """One option sampled under two names (``lr`` and ``strategy_options.lr``): only one of
    the two values would reach the run."""
    seen: dict[str, str] = {}
    for p in params:
        option = option_of(p.name)
        if option in seen and seen[option] == p.name:
            raise UsageError(f"{where}: {p.name} is named twice (dashes and underscores name the same option)")
        if option in seen:
            raise UsageError(
                f"{where}: {seen[option]} and {p.name} name one option ({option}): sample it under one name"
            )
        seen[option] = p.name


def _flatten(table: dict, where: str):
    for name, spec in table.items():
        name = name.replace("-", "_")
        if name in TABLES and isinstance(spec, dict) and not set(spec) & set(KINDS):
            for key, inner in spec.items():
                yield f"{name}.{key.replace('-', '_')}", inner
        else:
            yield name, spec


def _param(name: str, spec, where: str) -> Param:
    table, dot, key = name.partition(".")
    if dot and (table not in TABLES or not key):
        raise UsageError(f"{where}: unknown option {name!r}; a dotted name starts with one of {', '.join(TABLES)}")
    if not dot and name not in tunable_names():
        why = " (never tuned: the study chooses it)" if name in NOT_TUNED else ""
        raise UsageError(
            f"{where}: unknown option {name!r}{why}; known: {', '.join(tunable_names())}, "
            f"or {', '.join(t + '.KEY' for t in TABLES)}"
        )
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: {name} must be a table such as {{ uniform = [low, high] }}, got {spec!r}")
    kinds = [k for k in spec if k in KINDS]
    extra = sorted(set(spec) - set(KINDS) - {"step", "log"})
    if len(kinds) != 1 or extra:
        raise UsageError(
            f"{where}: {name} needs exactly one of {', '.join(KINDS)} (and step, log for int), "
            f"got {', '.join(spec) or 'nothing'}"
        )
    kind = kinds[0]
    if kind == "choices":
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices or set(spec) != {"choices"}:
            raise UsageError(f"{where}: {name}: choices must be a non-empty list, got {choices!r}")
        return Param(name, kind, choices=tuple(choices))
    return _bounded(name, kind, spec, where)


def _bounded(name: str, kind: str, spec: dict, where: str) -> Param:
    bounds = spec[kind]
    number = _integer if kind == "int" else _real
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(number(b) for b in bounds)):
        what = "integers" if kind == "int" else "numbers"
        raise UsageError(f"{where}: {name}: {kind} must be [low, high], two {what}, got {bounds!r}")
    low, high = bounds
    if not low < high:
        raise UsageError(f"{where}: {name}: {kind} needs low < high, got [{low}, {high}]")
    if kind == "uniform" and not math.isfinite(float(high) - float(low)):
        raise UsageError(f"{where}: {name}: uniform bounds [{low}, {high}] are too far apart (high - low overflows)")
    log = spec.get("log", False) if kind == "int" else kind == "log_uniform"
    if kind != "int" and ("step" in spec or "log" in spec):
        raise UsageError(f"{where}: {name}: step and log belong to int only")
    if not isinstance(log, bool):
        raise UsageError(f"{where}: {name}: log must be true or false, got {log!r}")
    if log and low <= 0:
        raise UsageError(f"{where}: {name}: a log scale needs low > 0, got [{low}, {high}]")
    step = spec.get("step", 1)
    if not (_integer(step) and step >= 1) or (log and step != 1):
        raise UsageError(f"{where}: {name}: step must be an integer >= 1 (1 with log = true), got {step!r}")
    if kind == "int" and (high - low) % step:
        raise UsageError(f"{where}: {name}: high - low ({high - low}) must be a multiple of step ({step})")
    return Param(name, kind, low, high, step, log)


def check_space(space: Space, base: dict) -> None:
    """Check the trial config of every value of :meth:`Param.corners` (each alone, on the
    base) as ``evolve`` checks a run before it starts: an option the strategy or agent does
    not know, a value of the wrong type, or one that breaks a rule (an odd population for a
    mirrored strategy, a population that cannot fit in memory) is refused now.  Values that
    break a rule only together are found when a trial samples them (:mod:`.trial`)."""
    for p in space.params:
        for value in p.corners():
            try:
                checked_config(with_params(base, {p.name: value}), 0)
            except UsageError as exc:
                raise UsageError(f"--space {space.path!r}: {p.name} = {value!r}: {exc}") from None


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
