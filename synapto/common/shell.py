"""Commands synapto prints for the user to run next (plot, render, resume, replay), and
the lines that end a command: what it wrote and what to run next (:func:`next_lines`).

They must run as printed from a fresh shell, where no virtual environment is
activated and ``python`` may be another interpreter, or none: so they name this
interpreter's own ``synapto`` script when it has one (``.venv/bin/synapto``), else
the interpreter itself (``.venv/bin/python -m synapto``), relative to the current
folder when it lies below it, and every argument is quoted for the shell.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def _short(path: Path) -> str:
    """``path`` relative to the current folder when it lies below it (``.venv/bin/...``)."""
    try:
        rel = str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
    return rel if "/" in rel else f"./{rel}"  # a word with a slash is a path to the shell


def synapto_prefix() -> list[str]:
    """The words that start synapto from a fresh shell."""
    exe = Path(sys.executable)
    script = exe.with_name("synapto")
    if script.is_file() and os.access(script, os.X_OK):
        return [_short(script)]
    return [_short(exe), "-m", "synapto"]


def synapto_command(*args) -> str:
    """``synapto ARGS`` as a shell command line that runs from a fresh shell."""
    return shlex.join([*synapto_prefix(), *map(str, args)])


def next_lines(*lines: tuple[str, object]) -> str:
    """The lines that end a command: ``label:  path or command``, the labels padded to one
    column (``learning curves:  synapto plot ...``)."""
    width = max(18, *(len(label) + 3 for label, _ in lines))
    return "\n".join(f"{label + ':':<{width}}{value}" for label, value in lines)
