"""Task farms: map a list of tasks to results, in one process or over MPI.

Both farms have the same interface, so the evolution loop, replay and the tests do
not care which one runs:

``farm.setup(spec)``
    ``spec`` is a picklable object with a ``build()`` method returning the handler,
    a callable ``handler(payload) -> result``.  Workers build it once (an env and an
    agent, say) and reuse it for every task.
``farm.map(payloads, schedule="dynamic", stop=None, progress=None, on_error="raise", context=None)``
    A :class:`Results` list: the results in the order of ``payloads``, whatever order
    they arrive in, carrying each task's :class:`Failure` (if it raised, under
    ``on_error="skip"``) and the map's :class:`MapStats` -- a failure travels with its
    result, like ``mpi4py.futures``' (result, exception) pairs.  With a ``context``
    the handler is called as ``handler(payload, context)``: data the tasks share
    (an ES generation's centre and noise keys), which an MPI farm sends to each
    worker once per map instead of with every task.  ``stop()`` returning True ends
    the map after the tasks in flight (:class:`FarmInterrupted`).
``farm.close()``
    Explicit shutdown; idempotent, called from the coordinator's ``finally:``.

:class:`SerialFarm` runs every task in this process.  Over MPI, rank 0 runs
:class:`synapto.parallel.coordinator.MPIFarm` (an event loop that never blocks on a
worker) and ranks 1.. run :func:`synapto.parallel.worker.serve`; what goes over the
wire and why no send may wait for its receiver: :mod:`synapto.parallel.wire`.
:func:`make_farm` gives each process its part.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from synapto.parallel.deadline import Deadline, run_task


@dataclass(frozen=True)
class Failure:
    """A task that raised: which, where, and the traceback."""

    index: int  #: position of the task in the map's payloads
    rank: int
    host: str
    traceback: str
    timeout: bool = False  #: the task ran past the farm's task timeout (rather than raising)

    @property
    def message(self) -> str:
        """The exception's last line (``ValueError: ...``)."""
        tb = self.traceback.strip()
        return tb.splitlines()[-1] if tb else "unknown error"

    def __str__(self) -> str:
        return f"task {self.index} failed on rank {self.rank} ({self.host}): {self.message}"


class TaskFailed(Exception):
    """A map stopped because a task raised (``on_error="raise"``); :attr:`failure` says
    which, where and why."""

    def __init__(self, failure: Failure):
        super().__init__(str(failure))
        self.failure = failure


class FarmInterrupted(Exception):
    """``map`` was stopped by its ``stop`` callback; tasks in flight were drained."""


@dataclass
class MapStats:
    """Worker-side time of one ``map`` call, summed over workers (seconds)."""

    compute: float = 0.0  #: inside the handler
    #: holding no task during the map (coordinator clock: load imbalance, waves,
    #: the coordinator's latency in handing out the next task)
    idle: float = 0.0
    wall: float = 0.0  #: wall time of the map call on the coordinator
    tasks: int = 0
    per_worker_compute: dict = field(default_factory=dict)
    #: as the workers report it: from their previous result to this task's start,
    #: so it also covers the coordinator's work between two maps
    worker_wait: float = 0.0
    coordinator_cpu: float = 0.0  #: CPU seconds of the coordinator's process during the map
    order: list = field(default_factory=list)  #: task indices in the order their results arrived


class Results(list):
    """The results of one ``map``, in task order (None where a task failed), with each
    task's :class:`Failure` and the map's :class:`MapStats`."""

    def __init__(self, values, failures: dict[int, Failure] | None = None, stats: MapStats | None = None):
        super().__init__(values)
        self.failures: dict[int, Failure] = dict(failures or {})  #: task index -> failure
        self.stats = stats if stats is not None else MapStats()

    def outcomes(self) -> list[tuple[Any, Failure | None]]:
        """``(result, failure)`` per task."""
        return [(v, self.failures.get(i)) for i, v in enumerate(self)]


class SerialFarm:
    """Runs every task in this process (one-process runs and unit tests)."""

    n_workers = 1

    def __init__(self, task_timeout: float | None = None):
        self._handler: Callable | None = None
        self.last_stats = MapStats()  #: the stats of the last map (informational)
        self.task_timeout = task_timeout
        self._deadline = Deadline(task_timeout)

    def setup(self, spec) -> None:
        self._handler = spec.build()

    def map(self, payloads: Sequence, schedule: str = "dynamic",
            stop: Callable[[], bool] | None = None,
            progress: Callable[[int, int], None] | None = None,
            on_error: str = "raise", context=None) -> Results:
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
        self.last_stats = MapStats(compute=wall, idle=0.0, wall=wall, tasks=len(out),
                                   per_worker_compute={0: wall}, coordinator_cpu=time.process_time() - cpu0,
                                   order=list(range(len(out))))
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

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(int(code))


def make_farm(task_timeout: float | None = None):
    """The farm for this process: ``(farm, is_coordinator)``.

    Outside MPI, or in a world of one rank: a :class:`SerialFarm`.  In a larger
    world, rank 0 gets an :class:`MPIFarm`; other ranks run :func:`serve` until
    the coordinator stops them and then get ``(None, False)``.  ``task_timeout``
    (seconds, None for none) bounds every task; see the module docstring.
    """
    from synapto.blas import limit_blas_threads
    from synapto.parallel.launch import world

    limit_blas_threads(1)  # every rank evaluates small matrices, one rank per core
    comm, rank, size = world()
    if size <= 1:
        return SerialFarm(task_timeout), True
    if rank == 0:
        from synapto.parallel.coordinator import MPIFarm

        return MPIFarm(comm, task_timeout=task_timeout), True
    from synapto.parallel.worker import serve

    serve(comm, task_timeout=task_timeout)
    return None, False
