"""Looking at runs: learning curves, animations, network drawings, CSV export.

- :mod:`synapto.viz.plot`    ``synapto plot``   learning curves of evolution and PPO runs
- :mod:`synapto.viz.render`  ``synapto render`` an animation of the champion (or a PPO policy)
- :mod:`synapto.viz.draw`    ``synapto draw``   the champion's network as a graph
- :mod:`synapto.viz.export`  ``synapto export`` per-generation / per-epoch statistics as CSV
- :mod:`synapto.viz.cli`     the four commands

Run files are read by :mod:`synapto.store.series` (the series) and :mod:`synapto.policies`
(the genome to look at); this module holds what the commands share for their output.
matplotlib and imageio (the ``plot`` extra) are imported only inside the commands that
need them, through :func:`require`, so the rest of synapto works without them.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir
from synapto.store import writing
from synapto.store.replace import fsync, fsync_dir

#: the x axes of ``synapto plot``
AXES = ("generation", "env-steps", "wall-time")


def require(module: str, command: str, package: str | None = None):
    """Import ``module`` for ``command``, or stop with a one-line hint at the ``plot`` extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = package or module.split(".")[0]
        raise UsageError(
            f"{command} needs {package}: pip install 'synapto-evo[plot]' (in a checkout: make install)"
        ) from None


def matplotlib_figure(command: str):
    """matplotlib's ``Figure`` class, rendering with Agg (no display, no pyplot state)."""
    mpl = require("matplotlib", command)
    mpl.use("Agg", force=True)
    from matplotlib.figure import Figure

    return Figure


def check_image_out(out: Path, suffixes: tuple[str, ...], what: str = "--out") -> str:
    """The lower-case suffix of ``out`` (one of ``suffixes``); one-line errors otherwise, also
    for a folder that cannot be written (checked before any work).  Nothing is created: see
    :func:`make_parent`."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in suffixes:
        raise UsageError(f"{what} {str(out)!r} must end in {' or '.join(suffixes)}")
    if out.is_dir():
        raise UsageError(f"{what} {str(out)!r} is a directory")
    check_out_dir(out.parent if str(out.parent) else Path("."), f"{what} {str(out)!r}: folder")
    return suffix


def make_parent(out: Path, what: str = "--out") -> None:
    """Create the folder of ``out`` (called once the picture is ready to be written)."""
    parent = Path(out).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what} {str(out)!r}: cannot create directory {str(parent)!r} ({exc.strerror})") from None


def write_output(out: Path, write, what: str = "--out") -> None:
    """``write(tmp)`` into a file beside ``out`` (of the same suffix: writers choose their
    format by it), then renamed over ``out``: a failure (a full disk) leaves a previous
    ``out`` whole and no partial file.  The folder is made first; a file system that
    refuses (read-only, no permission, full) is one line."""
    out = Path(out)
    make_parent(out, what)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.partial{out.suffix}")
    try:
        with writing(out, "writing it"):
            write(tmp)
            fsync(tmp)
            os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(out.parent)


def check_not_input(out: Path, inputs, what: str) -> None:
    """Refuse an output ``out`` that is one of the ``inputs`` (the same file under any name:
    a link, ``../``): writing it would destroy the run file being read."""
    resolved = Path(out).resolve()  # sub/../run.h5 is run.h5 even before sub exists
    for p in inputs:
        try:
            same = os.path.samefile(resolved, p)
        except OSError:  # out does not exist yet (or cannot be read): not an input
            same = False
        if same:
            raise UsageError(f"{what} {str(out)!r} is the run file {str(p)!r} itself: choose another path")
