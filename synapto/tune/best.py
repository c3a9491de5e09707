"""The best trial's config as a TOML that ``evolve --config`` runs.

The file is the base config's values with the best trial's sampled values set, and a
header saying which study chose it.  Its ``seed`` and ``out`` are the base config's (the
study never ran them); ``test_episodes`` is the base's too: trials run none.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from synapto.tune.base import TABLES


def study_stem(study: str, name: str) -> Path:
    """The stem of the files a study writes beside its database: ``FILE`` for the study
    named after a SQLite ``FILE.db`` (the default), ``FILE.NAME`` for another name in the
    same file (each study its own best config and trials), ``NAME`` here for a URL."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if "://" in study:
        return Path(safe)
    p = Path(study)
    return p.with_name(p.stem if name == p.stem else f"{p.stem}.{safe}")


def best_path(study: str, name: str) -> Path:
    """``FILE.best.toml`` beside a SQLite study ``FILE.db`` (``FILE.NAME.best.toml`` for another study name)."""
    stem = study_stem(study, name)
    return stem.with_name(f"{stem.name}.best.toml")


def trials_dir(study: str, name: str) -> Path:
    """The folder of the trials' run files, beside the study (``FILE.trials``, ``FILE.NAME.trials``)."""
    stem = study_stem(study, name)
    return stem.with_name(f"{stem.name}.trials")


def write_best(path: Path, values: dict, base_raw: dict, header: list[str]) -> None:
    """Write ``values`` (a trial's config values) as TOML, with ``seed``/``out`` of ``base_raw``."""
    top = {k: v for k, v in values.items() if k not in TABLES}
    for key in ("seed", "out", "test_episodes"):
        if key in base_raw:
            top[key] = base_raw[key]
    lines = [f"# {_comment(h)}" for h in header]
    lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in top.items()]  # the keys' canonical spelling
    for table in TABLES:
        if values.get(table):
            lines += ["", f"[{table}]", *(f"{toml_key(k)} = {toml_value(v)}" for k, v in values[table].items())]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
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
        return toml_string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {v!r}")


#: the escapes of a TOML basic string; other control characters are written \uXXXX
ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(s: str) -> str:
    """A TOML basic string of ``s``: every character as itself (UTF-8), except the quote,
    the backslash and control characters, which are escaped (TOML has no surrogate escapes,
    so a character outside the BMP is never written as two)."""
    out = []
    for ch in s:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(k: str) -> str:
    """A TOML key: bare where it may be, else quoted."""
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else toml_string(k)


def _comment(text: str) -> str:
    """``text`` fit for a TOML comment (which holds no control characters but the tab)."""
    return "".join(ch if _commentable(ch) else "?" for ch in text)


def _commentable(ch: str) -> bool:
    """Not a control character (the tab excepted), nor a lone surrogate (a file name's
    undecodable byte, which has no UTF-8 form)."""
    code = ord(ch)
    return ch == "\t" or (code >= 0x20 and code != 0x7F and not 0xD800 <= code <= 0xDFFF)
