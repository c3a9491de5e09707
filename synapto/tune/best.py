"""The best trial's config as a TOML that ``evolve --config`` runs.

The file is the base config's values with the best trial's sampled values set, and a
header saying which study chose it.  Its ``seed`` and ``out`` are the base config's (the
study never ran them); ``test_episodes`` is the base's too: trials run none.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from synapto.tune.base import TABLES


def best_path(study: str, name: str) -> Path:
    """``FILE.best.toml`` beside a SQLite study ``FILE.db``; ``<name>.best.toml`` here for a URL."""
    if "://" in study:
        return Path(f"{name}.best.toml")
    p = Path(study)
    return p.with_name(f"{p.stem}.best.toml")


def trials_dir(study: str, name: str) -> Path:
    """The folder of the trials' run files, beside the study (or here, for a URL)."""
    if "://" in study:
        return Path(f"{name}.trials")
    p = Path(study)
    return p.with_name(f"{p.stem}.trials")


def write_best(path: Path, values: dict, base_raw: dict, header: list[str]) -> None:
    """Write ``values`` (a trial's config values) as TOML, with ``seed``/``out`` of ``base_raw``."""
    top = {k: v for k, v in values.items() if k not in TABLES}
    for key in ("seed", "out", "test_episodes"):
        if key in base_raw:
            top[key] = base_raw[key]
    lines = [f"# {h}" for h in header]
    lines += [f"{k} = {toml_value(v)}" for k, v in top.items()]  # the keys' canonical spelling
    for table in TABLES:
        if values.get(table):
            lines += ["", f"[{table}]", *(f"{k} = {toml_value(v)}" for k, v in values[table].items())]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def toml_value(v: Any) -> str:
    """A TOML literal of a config value (numbers, booleans, strings, lists, tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {v!r}")
