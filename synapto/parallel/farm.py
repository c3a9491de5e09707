"""Task farms: map a list of tasks to results, in one process or over MPI; their
interface (:class:`~synapto.parallel.results.Farm`) and result types:
:mod:`synapto.parallel.results`.

:class:`SerialFarm` runs every task in this process.  Over MPI, rank 0 runs
:class:`synapto.parallel.coordinator.MPIFarm` (an event loop that never blocks on a
worker) and ranks 1.. run :func:`synapto.parallel.worker.serve`; what goes over the
wire and why no send may wait for its receiver: :mod:`synapto.parallel.wire`.
:func:`make_farm` gives each process its part; it hands the coordinator
:func:`mark_abandoned` (called when a rank is retired) rather than the coordinator
importing this module, so that the arrow between the two points one way.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from synapto.common.blas import limit_blas_threads
from synapto.parallel.coordinator import MPIFarm
from synapto.parallel.deadline import Deadline, run_task
from synapto.parallel.launch import abort_job, world
from synapto.parallel.results import Failure, FarmInterrupted, MapStats, Recipe, Results, TaskFailed
from synapto.parallel.worker import serve


class SerialFarm:
    """Runs every task in this process (one-process runs and unit tests)."""

    n_workers = 1
    in_process = True

    def __init__(self, task_timeout: float | None = None):
        self._handler: Callable | None = None
        self.last_stats = MapStats()  #: the stats of the last map (informational)
        self.task_timeout = task_timeout
        self._deadline = Deadline(task_timeout)

    def setup(self, spec: Recipe) -> None:
        self._handler = spec.build()

    def map(
        self,
        payloads: Sequence,
        schedule: str = "dynamic",
        stop: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
        on_error: str = "raise",
        context: Any = None,
    ) -> Results:
        if self._handler is None:
            raise RuntimeError("SerialFarm.map called before setup")
        t0, cpu0 = time.perf_counter(), time.process_time()
        out = []
        failures = {}
        for i, p in enumerate(payloads):
            if stop is not None and stop():
                raise FarmInterrupted()
            value, error = run_task(self._handler, p, self._deadline, context)
            if error is None:
                out.append(value)
            else:
                failure = Failure(i, 0, socket.gethostname(), error[0], timeout=error[1])
                if on_error != "skip":
                    raise TaskFailed(failure) from None
                failures[i] = failure
                out.append(None)
            if progress is not None:
                progress(i + 1, len(payloads))
        wall = time.perf_counter() - t0
        self.last_stats = MapStats(
            compute=wall,
            idle=0.0,
            wall=wall,
            tasks=len(out),
            per_worker_compute={0: wall},
            coordinator_cpu=time.process_time() - cpu0,
            order=list(range(len(out))),
        )
        return Results(out, failures, self.last_stats)

    def close(self) -> None:
        self._handler = None


#: set once a coordinator retired a rank: this process must end the MPI job when it ends
_abandoned = False


def mark_abandoned() -> None:
    """A worker rank was retired: :func:`abort_if_abandoned` ends the MPI job."""
    global _abandoned
    _abandoned = True


def abort_if_abandoned(code: int) -> None:
    """End the MPI job with ``MPI_Abort(code)`` if a worker rank was retired (it never
    gets STOP and cannot be ended otherwise); called as the command exits."""
    if not _abandoned:
        return
    from mpi4py import MPI

    abort_job(MPI.COMM_WORLD, code)


def make_farm(task_timeout: float | None = None):
    """The farm for this process: ``(farm, is_coordinator)``.

    Outside MPI, or in a world of one rank: a :class:`SerialFarm`.  In a larger
    world, rank 0 gets an :class:`MPIFarm`; other ranks run :func:`serve` until
    the coordinator stops them and then get ``(None, False)``.  ``task_timeout``
    (seconds, None for none) bounds every task; see the module docstring.
    """
    limit_blas_threads(1)  # every rank evaluates small matrices, one rank per core
    comm, rank, size = world()
    if size <= 1:
        return SerialFarm(task_timeout), True
    if rank == 0:
        return MPIFarm(comm, task_timeout=task_timeout, on_retire=mark_abandoned), True

    serve(comm, task_timeout=task_timeout)
    return None, False
