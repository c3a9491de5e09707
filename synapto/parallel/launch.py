"""Start under MPI: detect an existing MPI world, or relaunch under ``mpiexec``.

``synapto evolve --workers N`` (and ``synapto ppo --cpu N``) started outside MPI
re-executes the same command line as ``mpiexec -n N' python -m synapto ...``.
Detection looks at the launcher's environment variables, so a plain one-process
run never imports mpi4py.  The mpiexec used is, in order: ``$SYNAPTO_MPIEXEC``,
the ``mpiexec`` beside this Python (the mpich wheel installs it there), then the
one on ``$PATH`` (a cluster's own MPI, which a cluster-built mpi4py needs).
"""

from __future__ import annotations

import os
import shutil
import sys

from synapto.errors import UsageError

# Variables set by MPICH/Hydra, Open MPI, PMIx, Intel MPI and Slurm's srun.
_MPI_ENV = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
            "MPI_LOCALNRANKS", "MPI_LOCALRANKID", "HYDRA_CONTROL_FD")
LAUNCHED = "SYNAPTO_LAUNCHED"


def under_mpi() -> bool:
    """True when this process was started by an MPI launcher."""
    return any(v in os.environ for v in _MPI_ENV) or LAUNCHED in os.environ


def find_mpiexec() -> str:
    explicit = os.environ.get("SYNAPTO_MPIEXEC")
    if explicit:
        return explicit
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(beside):
        return beside
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise UsageError("no mpiexec found: install the 'mpich' wheel or set SYNAPTO_MPIEXEC")
    return found


def relaunch(n_procs: int, argv: list[str] | None = None) -> None:
    """Replace this process with ``mpiexec -n n_procs python -m synapto <argv>``."""
    if n_procs < 1:
        raise UsageError(f"number of MPI processes must be >= 1, got {n_procs}")
    argv = sys.argv[1:] if argv is None else argv
    mpiexec = find_mpiexec()
    env = dict(os.environ)
    env[LAUNCHED] = "1"
    # Make mpiexec's output and ours interleave sensibly.
    env.setdefault("PYTHONUNBUFFERED", "1")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(mpiexec, [mpiexec, "-n", str(n_procs), sys.executable, "-m", "synapto", *argv], env)


def world():
    """``(comm, rank, size)`` of MPI_COMM_WORLD, or ``(None, 0, 1)`` outside MPI."""
    if not under_mpi():
        return None, 0, 1
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()
