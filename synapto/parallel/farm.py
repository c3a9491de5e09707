"""Task farms: map a list of tasks to results, in one process or over MPI.

Both farms have the same interface, so the evolution loop, replay and the tests do
not care which one runs:

``farm.setup(spec)``
    ``spec`` is a picklable object with a ``build()`` method returning the handler,
    a callable ``handler(payload) -> result``.  Workers build it once (an env and an
    agent, say) and reuse it for every task.
``farm.map(payloads, schedule="dynamic", stop=None, on_error="raise")``
    A :class:`Results` list: the results in the order of ``payloads``, whatever order
    they arrive in, carrying each task's :class:`Failure` (if it raised, under
    ``on_error="skip"``) and the map's :class:`MapStats` -- a failure travels with its
    result, like ``mpi4py.futures``' (result, exception) pairs.
``farm.close()``
    Explicit shutdown; idempotent, called from the coordinator's ``finally:``.

MPI design (:class:`MPIFarm`, rank 0 = coordinator, ranks 1.. = workers):

* Dynamic scheduling: a worker gets its next task as soon as it returns a result
  (``schedule="waves"`` reproduces the reference's blocking waves for comparison).
  A busy worker also holds its next task (prefetch), so that it never waits for the
  coordinator's reply -- except for the last ``n_workers`` tasks of a map, which go
  to whichever worker is free first.
  Tasks and results carry the task's index; results are placed by index.
* No busy waiting.  MPI's blocking receive spins on a core.  Here every receive
  (coordinator waiting for results, worker waiting for work) polls ``Iprobe`` and
  sleeps between polls with an exponential back-off from 10 µs to ``max_sleep``
  (1 ms).  The coordinator therefore uses almost no CPU while workers run, and the
  added latency per task is at most ``max_sleep``, small against an episode.
* A worker never lets an exception escape: it returns the traceback with its rank
  and host; the coordinator drains the tasks still in flight and raises
  :class:`TaskFailed` (or, under ``on_error="skip"``, records the failure with the
  task's result and goes on).  Shutdown is an explicit STOP message sent once to every
  worker by ``close()``.
* Task timeout (``task_timeout`` seconds, off by default).  A task running longer is
  interrupted inside its worker (an interval timer raises :class:`TaskTimeout` in the
  handler) and fails like a task that raised; the worker goes on with its next task.
  A worker that does not answer at all -- stopped, hung in C code, cut off -- is
  *retired* by the coordinator once its current task is :func:`grace` seconds past
  the timeout: that task fails (its :class:`Failure` has ``timeout=True``), the task it
  held in advance goes to another worker, and the rank gets no more messages, STOP
  included.  MPI cannot end one rank, so when the command ends, a coordinator that
  retired a rank ends the whole MPI job with ``MPI_Abort`` and the command's exit code
  (:func:`abort_if_abandoned`); ``mpiexec`` then kills every rank, the retired one too.
"""

from __future__ import annotations

import gc
import socket
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Sequence

from synapto.parallel.deadline import Deadline, grace, run_task


class Tag(IntEnum):
    SETUP = 11
    TASK = 12
    RESULT = 13
    ERROR = 14
    STOP = 15


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
            on_error: str = "raise") -> Results:
        if self._handler is None:
            raise RuntimeError("SerialFarm.map called before setup")
        t0 = time.perf_counter()
        out = []
        failures = {}
        for i, p in enumerate(payloads):
            if stop is not None and stop():
                raise FarmInterrupted()
            value, error = run_task(self._handler, p, self._deadline)
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
                                   per_worker_compute={0: wall})
        return Results(out, failures, self.last_stats)

    def close(self) -> None:
        self._handler = None


def poll_recv(comm, source: int, status, max_sleep: float = 1e-3, deadline: float | None = None):
    """Receive the next message from ``source`` without spinning a core.

    Returns ``(obj, tag, source)``, or None once ``time.perf_counter()`` passes ``deadline``.
    """
    from mpi4py import MPI

    delay = 1e-5
    while not comm.Iprobe(source=source, tag=MPI.ANY_TAG, status=status):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2.0, max_sleep)
    src, tag = status.Get_source(), status.Get_tag()
    return comm.recv(source=src, tag=tag), tag, src


class MPIFarm:
    """The coordinator's side of the MPI task farm (see the module docstring)."""

    def __init__(self, comm, max_sleep: float = 1e-3, task_timeout: float | None = None):
        from mpi4py import MPI

        if comm.Get_size() < 2:
            raise ValueError("MPIFarm needs at least one worker rank")
        self.comm = comm
        self.workers = list(range(1, comm.Get_size()))  #: ranks that get tasks (not retired)
        self.n_workers = len(self.workers)
        self.max_sleep = max_sleep
        self.task_timeout = task_timeout
        self.retired: dict[int, str] = {}  #: rank -> why it gets no more tasks
        self.hosts = comm.gather(socket.gethostname(), root=0)  #: by rank (serve() sends its host)
        self._status = MPI.Status()
        self._any = MPI.ANY_SOURCE
        self._closed = False
        self.last_stats = MapStats()  #: the stats of the last map (informational)

    def setup(self, spec) -> None:
        for r in self.workers:
            self.comm.send(spec, dest=r, tag=Tag.SETUP)

    def _retire(self, rank: int, why: str) -> None:
        global _abandoned
        self.workers.remove(rank)
        self.retired[rank] = why
        _abandoned = True
        sys.stderr.write(f"warning: {why}; it gets no more tasks, and the MPI job ends with MPI_Abort "
                         f"when this command ends\n")
        sys.stderr.flush()

    def map(self, payloads: Sequence, schedule: str = "dynamic",
            stop: Callable[[], bool] | None = None,
            progress: Callable[[int, int], None] | None = None,
            on_error: str = "raise") -> Results:
        """Results in the order of ``payloads``.

        ``on_error="raise"``: the first failing task stops the map (tasks in flight
        are drained) and raises :class:`TaskFailed`.  ``"skip"``: a failing task
        gives ``None`` and its :class:`Failure` rides with the results.  A task that
        runs past ``task_timeout`` fails (see the module docstring); when no worker is
        left to run the remaining tasks, :class:`TaskFailed` is raised in either mode.
        """
        failures: dict[int, Failure] = {}
        if schedule not in ("dynamic", "waves"):
            raise ValueError(f"schedule must be 'dynamic' or 'waves', got {schedule!r}")
        t0 = time.perf_counter()
        n = len(payloads)
        results: list[Any] = [None] * n
        done = [False] * n
        queue = deque(range(n))
        inflight: dict[int, deque] = {r: deque() for r in self.workers}  # rank -> task indices, oldest first
        started: dict[int, float] = {}  # rank -> when its oldest task in flight started (about)
        timeout = self.task_timeout
        hard = timeout + grace(timeout) if timeout else None
        n_inflight = 0
        stats = MapStats(tasks=n)
        n_done = 0
        failure: Failure | None = None
        interrupted = False
        busy = 0.0  # worker-seconds holding a task: from a send to an idle worker to its last result

        def send(rank: int) -> None:
            nonlocal busy, n_inflight
            i = queue.popleft()
            if not inflight[rank]:
                started[rank] = time.perf_counter()
                busy -= started[rank]
            inflight[rank].append(i)
            n_inflight += 1
            self.comm.send((i, payloads[i]), dest=rank, tag=Tag.TASK)

        def may_send() -> bool:
            nonlocal interrupted
            if failure is not None or interrupted:
                return False
            if stop is not None and stop():
                interrupted = True
                return False
            return bool(queue)

        while queue or n_inflight:
            if schedule == "dynamic":
                for r in self.workers:
                    if not inflight[r] and may_send():
                        send(r)
                # Prefetch: a busy worker gets its next task now, so it need not wait for the
                # coordinator's reply; not among the last n_workers tasks, which go to whichever
                # worker is free first.
                for r in self.workers:
                    if len(inflight[r]) == 1 and len(queue) > len(self.workers) and may_send():
                        send(r)
            elif not n_inflight:
                for r in self.workers:
                    if may_send():
                        send(r)
            if not n_inflight:
                if queue and not self.workers and failure is None and not interrupted:
                    last = list(self.retired)[-1]
                    failure = Failure(queue[0], last, self.hosts[last], "RuntimeError: no worker rank left to "
                                      "run the remaining tasks (every one stopped answering)\n", timeout=True)
                break
            deadline = min(started[r] for r in self.workers if inflight[r]) + hard if hard else None
            got = poll_recv(self.comm, self._any, self._status, self.max_sleep, deadline)
            if got is None:  # a worker is silent past the timeout and its grace: retire it
                now = time.perf_counter()
                for r in [r for r in self.workers if inflight[r] and now > started[r] + hard]:
                    i, *held = inflight[r]
                    inflight[r].clear()
                    n_inflight -= 1 + len(held)
                    busy += now
                    queue.extendleft(reversed(held))  # never started there: another worker runs them
                    self._retire(r, f"rank {r} ({self.hosts[r]}) did not answer within the task timeout of "
                                    f"{timeout:g} s (+{grace(timeout):g} s grace)")
                    tb = (f"TaskTimeout: no answer from rank {r} within the task timeout of {timeout:g} s "
                          f"(+{grace(timeout):g} s grace); the rank is retired\n")
                    if on_error == "skip":
                        failures[i] = Failure(i, r, self.hosts[r], tb, timeout=True)
                        results[i], done[i] = None, True
                        n_done += 1
                    elif failure is None:
                        failure = Failure(i, r, self.hosts[r], tb, timeout=True)
                continue
            msg, tag, src = got
            if src in self.retired:
                continue  # a retired rank woke up: what it sends is ignored
            i = inflight[src].popleft() if inflight.get(src) else None
            if i is not None:
                n_inflight -= 1
                now = time.perf_counter()
                if not inflight[src]:
                    busy += now
                else:
                    started[src] = now  # its prefetched task starts now
            if tag == Tag.RESULT:
                index, value, compute, idle = msg
                results[index], done[index] = value, True
                n_done += 1
                stats.compute += compute
                stats.worker_wait += idle
                stats.per_worker_compute[src] = stats.per_worker_compute.get(src, 0.0) + compute
                if progress is not None:
                    progress(n_done, n)
            elif tag == Tag.ERROR:
                index, rank, host, tb, timed_out = msg
                if on_error == "skip":
                    failures[index] = Failure(index, rank, host, tb, timed_out)
                    results[index], done[index] = None, True
                    n_done += 1
                elif failure is None:
                    failure = Failure(index, rank, host, tb, timed_out)
            else:  # pragma: no cover - protocol violation
                raise RuntimeError(f"unexpected message tag {tag} from rank {src} (task {i})")
        stats.wall = time.perf_counter() - t0
        stats.idle = max(self.n_workers * stats.wall - busy, 0.0)
        self.last_stats = stats
        if failure is not None:
            raise TaskFailed(failure)
        if interrupted or not all(done):
            raise FarmInterrupted()
        return Results(results, failures, stats)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.retired:
            return  # the job ends with MPI_Abort (abort_if_abandoned): STOP could block on a hung rank
        for r in self.workers:
            self.comm.send(None, dest=r, tag=Tag.STOP)


#: set once a coordinator retired a rank: this process must end the MPI job when it ends
_abandoned = False


def abort_if_abandoned(code: int) -> None:
    """End the MPI job with ``MPI_Abort(code)`` if a worker rank was retired (it never
    gets STOP and cannot be ended otherwise); called as the command exits."""
    if not _abandoned:
        return
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(int(code))


def serve(comm, max_sleep: float = 1e-3, task_timeout: float | None = None) -> None:
    """A worker rank's loop: build handlers, run tasks, until STOP."""
    from mpi4py import MPI

    from synapto.stopping import ignore_in_worker

    ignore_in_worker()  # the coordinator decides when workers stop
    status = MPI.Status()
    rank = comm.Get_rank()
    host = socket.gethostname()
    comm.gather(host, root=0)  # MPIFarm.hosts
    deadline = Deadline(task_timeout)
    handler = None
    setup_error: str | None = None
    t_free = time.perf_counter()
    while True:
        msg, tag, _ = poll_recv(comm, 0, status, max_sleep)
        if tag == Tag.STOP:
            return
        if tag == Tag.SETUP:
            try:
                handler, setup_error = msg.build(), None
            except Exception:
                handler, setup_error = None, traceback.format_exc()
            # Everything alive now (interpreter, gymnasium, numpy, MPI, the handler) stays
            # alive: keep it out of the cyclic collector's scans, which every task's
            # allocations trigger (halves the collector's share of a BipedalWalker task).
            gc.freeze()
            t_free = time.perf_counter()
            continue
        if tag != Tag.TASK:  # pragma: no cover - protocol violation
            raise RuntimeError(f"worker {rank}: unexpected tag {tag}")
        index, payload = msg
        t_start = time.perf_counter()
        idle = t_start - t_free
        if handler is None:
            error = ("RuntimeError: worker setup failed:\n" + (setup_error or "no setup received"), False)
        else:
            value, error = run_task(handler, payload, deadline)
        if error is not None:
            comm.send((index, rank, host, *error), dest=0, tag=Tag.ERROR)
        else:
            t_free = time.perf_counter()
            comm.send((index, value, t_free - t_start, idle), dest=0, tag=Tag.RESULT)
        t_free = time.perf_counter()


def make_farm(task_timeout: float | None = None):
    """The farm for this process: ``(farm, is_coordinator)``.

    Outside MPI, or in a world of one rank: a :class:`SerialFarm`.  In a larger
    world, rank 0 gets an :class:`MPIFarm`; other ranks run :func:`serve` until
    the coordinator stops them and then get ``(None, False)``.  ``task_timeout``
    (seconds, None for none) bounds every task; see the module docstring.
    """
    from synapto.parallel.launch import world

    comm, rank, size = world()
    if size <= 1:
        return SerialFarm(task_timeout), True
    if rank == 0:
        return MPIFarm(comm, task_timeout=task_timeout), True
    serve(comm, task_timeout=task_timeout)
    return None, False
