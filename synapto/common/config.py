"""Config files: TOML loading of the shipped and the user's configs (``--config``), for
``evolve`` (:class:`synapto.evolution.config.EvolveConfig`) and ``ppo``
(:class:`synapto.ppo.config.PPOConfig`).  Keys are the command-line options' names.

This module knows no config class: each config module reads its files through
:func:`load_toml` (``EvolveConfig.from_toml``, ``PPOConfig.from_toml``), so the import
arrows run one way, from the configs down to here."""

from __future__ import annotations

import os
import sys
from collections.abc import Set as AbstractSet
from importlib import resources
from pathlib import Path
from typing import Any

from synapto.common.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def shipped_configs() -> dict[str, Path]:
    """The configs shipped with synapto (``experiments/*.toml``, package data), by name."""
    folder = Path(str(resources.files("synapto") / "experiments"))
    return {p.stem: p for p in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def find_config(path: str | Path) -> Path:
    """``--config``: a TOML file, or the name of a shipped config (``quickstart``,
    ``lunarlander_learn``, ...: see :func:`shipped_configs`) when no such file exists."""
    p = Path(path)
    if p.exists() or len(p.parts) != 1:
        return p
    return shipped_configs().get(p.stem if p.suffix == ".toml" else p.name, p)


def load_toml(path: str | Path, allowed: AbstractSet[str]) -> dict[str, Any]:
    """Read a TOML config (a file, or a shipped config's name); keys may use dashes or
    underscores; unknown keys are errors."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"a config is a TOML file's path or a shipped config's name, got {path!r}")
    p = find_config(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--config {str(p)!r} is not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    except OSError as exc:
        names = ", ".join(shipped_configs())
        raise UsageError(
            f"--config {str(p)!r} cannot be read ({exc.strerror}); shipped configs by name: {names or 'none'}"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--config {str(p)!r} does not parse as TOML ({exc})") from None
    data = {k.replace("-", "_"): v for k, v in raw.items()}
    if len(data) < len(raw):
        twice = sorted(k for k in data if sum(r.replace("-", "_") == k for r in raw) > 1)
        raise UsageError(
            f"--config {str(p)!r} sets {', '.join(twice)} twice (dashes and underscores name the same key)"
        )
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise UsageError(
            f"--config {str(p)!r} has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed))}"
        )
    out = data.get("out")
    if out is not None and not (isinstance(out, str) and out):
        raise UsageError(f"--config {str(p)!r} sets out = {out!r}; out is a run file's path (a string)")
    return data


def one_seed(value, path) -> int:
    """A config's ``seed``: one integer (a file listing several needs ``seed=`` given: one config, one seed)."""
    seeds = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(seeds) != 1:
        raise UsageError(f"--config {str(path)!r} lists seeds {seeds}; a config object has one: pass seed=N")
    return seeds[0]
