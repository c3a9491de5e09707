"""The coordinator's side of the MPI task farm (rank 0): a small event loop.

Each worker rank is in one of four named states (:class:`State`):

==============  ======================================================================
``IDLE``        holds no task
``BUSY``        runs one task
``PREFETCHED``  runs one task and holds the next, so it never waits for the coordinator
``RETIRED``     stopped answering within the task timeout: gets no more messages
==============  ======================================================================

The loop (:meth:`MPIFarm.map`) reacts to three events: a send completed
(:class:`~synapto.parallel.wire.Outbox`), a worker announced a result (matched with
``improbe``: the worker is free from that moment, its data may still be arriving
through an ``irecv``), or a worker stayed silent past the task timeout.  After a
worker frees up it is fed (:meth:`MPIFarm._feed`): a task if it is idle, and a
prefetched next task while more tasks are queued than there are workers -- the last
``n_workers`` tasks of a map go to whichever worker is free first.  Nothing in the
loop waits for a worker, whatever the messages' sizes (:mod:`synapto.parallel.wire`
says why that matters); with nothing to do, it sleeps 10 µs doubling to 1 ms, or to a
twentieth of a typical task where tasks take longer (20 ms at most): a worker that
finishes is served at most that late, and it holds its next task meanwhile.

Tasks and results carry the task's index; results are placed by index, so the
results of a map do not depend on which worker ran what.  ``schedule="waves"``
reproduces the reference's blocking waves (one task per worker, the next wave once
all returned) for comparison.

A map may share a *context* among its tasks (``map(..., context=obj)``): each worker
gets it once, before its first task of the map, and its handler is called as
``handler(payload, context)``.  An evolution strategy's generation uses it to send
the centre and noise keys once, and each task carries only its sample's index.

Failures: a worker returns a task's traceback with its rank and host; under
``on_error="raise"`` the map drains the tasks in flight and raises
:class:`~synapto.parallel.results.TaskFailed`, under ``"skip"`` the failure rides with
the results.  Task timeout: a worker's own timer interrupts a task that overruns
``task_timeout`` (:mod:`synapto.parallel.deadline`); a worker silent
:func:`~synapto.parallel.deadline.grace` seconds longer is retired: its task fails
with ``timeout=True``, its prefetched task goes to another worker, and the MPI job
ends with ``MPI_Abort`` when the command ends: the farm calls ``on_retire`` (given by
:func:`~synapto.parallel.farm.make_farm`: :func:`~synapto.parallel.farm.mark_abandoned`),
so this module needs nothing of :mod:`synapto.parallel.farm`, which builds it.
"""

from __future__ import annotations

import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from synapto.parallel.deadline import grace
from synapto.parallel.results import Failure, FarmInterrupted, MapStats, Recipe, Results, TaskFailed
from synapto.parallel.wire import Backoff, Frame, Outbox, Tag


class State(Enum):
    """A worker rank's state, as the loop reads it (:attr:`Worker.state`)."""

    IDLE = "idle"
    BUSY = "busy"
    PREFETCHED = "prefetched"
    RETIRED = "retired"


#: the state of a worker that is not retired, by the number of tasks it holds
_BY_TASKS = (State.IDLE, State.BUSY, State.PREFETCHED)


@dataclass(eq=False)
class Worker:
    """The coordinator's view of one worker rank."""

    rank: int
    host: str
    tasks: deque = field(default_factory=deque)  #: task indices sent to it, the running one first
    since: float = 0.0  #: when its running task started (about: when it was sent or the previous one ended)
    context: int | None = None  #: id of the last context it was sent
    retired: str = ""  #: why it gets no more messages ("" while it does)

    @property
    def state(self) -> State:
        if self.retired:
            return State.RETIRED
        return _BY_TASKS[len(self.tasks)]


class _Map:
    """The state of one ``map`` call."""

    def __init__(self, payloads: Sequence, stop, progress, on_error: str, waves: bool):
        n = len(payloads)
        self.payloads, self.stop, self.progress, self.on_error, self.waves = payloads, stop, progress, on_error, waves
        self.queue = deque(range(n))
        self.results: list[Any] = [None] * n
        self.done = [False] * n
        self.n_done = 0
        self.inflight = 0  #: tasks sent and not yet announced back
        self.failures: dict[int, Failure] = {}
        self.failure: Failure | None = None  #: the failure that stops the map (on_error="raise")
        self.interrupted = False
        self.context: tuple[int, Frame] | None = None  #: (id, pickled) of the map's shared context
        self.stats = MapStats(tasks=n)
        self.busy = 0.0  #: worker-seconds holding a task (from idle to holding, until idle again)

    @property
    def halted(self) -> bool:
        return self.failure is not None or self.interrupted

    def may_send(self) -> bool:
        if self.halted or not self.queue:
            return False
        if self.stop is not None and self.stop():
            self.interrupted = True
            return False
        return True

    def fail(self, failure: Failure) -> None:
        i = failure.index
        if self.on_error == "skip":
            self.failures[i] = failure
            self.results[i], self.done[i] = None, True
            self.n_done += 1
        elif self.failure is None:
            self.failure = failure


class MPIFarm:
    """Rank 0's task farm over the ranks of ``comm`` (see the module docstring)."""

    #: the coordinator sleeps between polls at most this fraction of a typical task ...
    POLL_FRACTION = 0.05
    #: ... and never longer than this (seconds)
    MAX_POLL = 0.02
    #: its first sleep after an event, as a fraction of a typical task (10 µs to 1 ms)
    FIRST_POLL_FRACTION = 0.01

    def __init__(
        self,
        comm,
        max_sleep: float = 1e-3,
        task_timeout: float | None = None,
        on_retire: Callable[[], None] | None = None,
    ):
        from mpi4py import MPI

        if comm.Get_size() < 2:
            raise ValueError("MPIFarm needs at least one worker rank")
        self.comm = comm
        self.max_sleep = max_sleep
        self.task_timeout = task_timeout
        self.on_retire = on_retire  #: called when a rank is retired (the job must end with MPI_Abort)
        self.hosts = comm.gather(socket.gethostname(), root=0)  #: by rank (serve() sends its host)
        self.pool = [Worker(r, self.hosts[r]) for r in range(1, comm.Get_size())]
        self.n_workers = len(self.pool)
        self.in_process = False
        self.outbox = Outbox(comm)
        self._MPI = MPI
        self._status = MPI.Status()
        self._incoming: list = []  #: [request, worker, tag] of announced results still arriving
        self._ignored: list = []  #: receives from retired ranks (completed and dropped, never waited for)
        self._contexts = 0
        self._typical = 0.0  #: a running mean of the tasks' compute time (seconds)
        self._closed = False
        self.last_stats = MapStats()  #: the stats of the last map (informational)

    @property
    def workers(self) -> list[int]:
        """Ranks that get tasks (not retired)."""
        return [w.rank for w in self.pool if w.state is not State.RETIRED]

    @property
    def retired(self) -> dict[int, str]:
        """Retired rank -> why it gets no more tasks."""
        return {w.rank: w.retired for w in self.pool if w.retired}

    def setup(self, spec: Recipe) -> None:
        for w in self.pool:
            if w.state is not State.RETIRED:
                self.outbox.send_frame(Frame(spec), w.rank, Tag.SETUP)

    # -- sending ---------------------------------------------------------------
    def _send(self, m: _Map, w: Worker) -> None:
        i = m.queue.popleft()
        if not w.tasks:
            w.since = time.perf_counter()
            m.busy -= w.since
        w.tasks.append(i)
        m.inflight += 1
        ctx = None
        if m.context is not None:
            ctx, data = m.context
            if w.context != ctx:
                self.outbox.send_frame(data, w.rank, Tag.CONTEXT)
                w.context = ctx
        self.outbox.send_frame(Frame((i, ctx, m.payloads[i])), w.rank, Tag.TASK)

    def _feed(self, m: _Map, w: Worker) -> None:
        """Give worker ``w`` a task if it holds none, and its next one while more tasks are
        queued than there are workers (dynamic schedule)."""
        if w.state is State.RETIRED or m.waves:
            return
        if w.state is State.IDLE and m.may_send():
            self._send(m, w)
        if w.state is State.BUSY and len(m.queue) > self.n_live and m.may_send():
            self._send(m, w)

    def _fill(self, m: _Map) -> None:
        """Feed every worker (a map's start, a wave, tasks handed back by a retired rank)."""
        if m.waves:
            if not m.inflight:
                for w in self.pool:
                    if w.state is not State.RETIRED and m.may_send():
                        self._send(m, w)
            return
        for w in self.pool:
            if w.state is State.IDLE and m.may_send():
                self._send(m, w)
        for w in self.pool:
            self._feed(m, w)

    @property
    def n_live(self) -> int:
        return sum(1 for w in self.pool if w.state is not State.RETIRED)

    # -- receiving -------------------------------------------------------------
    def _receive(self, m: _Map) -> bool:
        """Match every announced message (the sender is free from now on), complete what
        has arrived; True if anything happened."""
        MPI, comm, status = self._MPI, self.comm, self._status
        event = False
        while True:
            msg = comm.improbe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
            if msg is None:
                break
            event = True
            w = self.pool[status.Get_source() - 1]
            tag = status.Get_tag()
            if w.state is State.RETIRED:
                self._ignored.append(msg.irecv())  # a retired rank woke up: what it sends is dropped
                continue
            w.tasks.popleft()
            m.inflight -= 1
            now = time.perf_counter()
            if w.tasks:
                w.since = now  # its prefetched task starts now
            else:
                m.busy += now
            self._incoming.append([msg.irecv(), w, tag])
            self._feed(m, w)
            if m.waves:
                self._fill(m)
        if self._incoming:
            done, values = MPI.Request.testsome([x[0] for x in self._incoming])
            if done:
                event = True
                for k, value in zip(done, values):
                    self._arrived(m, self._incoming[k][1], self._incoming[k][2], value)
                for k in sorted(done, reverse=True):
                    del self._incoming[k]
        if self._ignored:
            MPI.Request.Testsome(self._ignored)
            self._ignored = [r for r in self._ignored if r != MPI.REQUEST_NULL]
        return event

    def _arrived(self, m: _Map, w: Worker, tag: int, msg) -> None:
        if tag == Tag.RESULT:
            index, value, compute, idle = msg
            m.results[index], m.done[index] = value, True
            m.n_done += 1
            s = m.stats
            s.compute += compute
            s.worker_wait += idle
            s.per_worker_compute[w.rank] = s.per_worker_compute.get(w.rank, 0.0) + compute
            self._typical += 0.1 * (compute - self._typical)
            s.order.append(index)
            if m.progress is not None:
                m.progress(m.n_done, len(m.results))
        elif tag == Tag.ERROR:
            m.fail(Failure(*msg))
        else:  # pragma: no cover - protocol violation
            raise RuntimeError(f"unexpected message tag {tag} from rank {w.rank}")

    # -- silent workers ----------------------------------------------------------
    def _retire_silent(self, m: _Map, hard: float) -> bool:
        """Retire every worker whose running task is ``hard`` seconds old; True if any was."""
        now = time.perf_counter()
        silent = [w for w in self.pool if w.state in (State.BUSY, State.PREFETCHED) and now > w.since + hard]
        timeout = self.task_timeout
        assert timeout is not None  # called only under a task timeout (hard = timeout + grace)
        for w in silent:
            i, *held = w.tasks
            w.tasks.clear()
            m.inflight -= 1 + len(held)
            m.busy += now
            m.queue.extendleft(reversed(held))  # never started there: another worker runs them
            why = (
                f"rank {w.rank} ({w.host}) did not answer within the task timeout of {timeout:g} s "
                f"(+{grace(timeout):g} s grace)"
            )
            w.retired = why
            if self.on_retire is not None:
                self.on_retire()
            sys.stderr.write(
                f"warning: {why}; it gets no more tasks, and the MPI job ends with MPI_Abort when this command ends\n"
            )
            sys.stderr.flush()
            m.fail(
                Failure(
                    i,
                    w.rank,
                    w.host,
                    f"TaskTimeout: no answer from rank {w.rank} within the task "
                    f"timeout of {timeout:g} s (+{grace(timeout):g} s grace); the rank "
                    f"is retired\n",
                    timeout=True,
                )
            )
        return bool(silent)

    # -- the loop --------------------------------------------------------------
    def map(
        self,
        payloads: Sequence,
        schedule: str = "dynamic",
        stop: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
        on_error: str = "raise",
        context: Any = None,
    ) -> Results:
        """Results in the order of ``payloads`` (see :class:`~synapto.parallel.results.Farm`
        for the interface and the module docstring for the design)."""
        if schedule not in ("dynamic", "waves"):
            raise ValueError(f"schedule must be 'dynamic' or 'waves', got {schedule!r}")
        t0, cpu0 = time.perf_counter(), time.process_time()
        m = _Map(payloads, stop, progress, on_error, schedule == "waves")
        if context is not None:
            self._contexts += 1
            m.context = (self._contexts, Frame((self._contexts, context)))
        timeout = self.task_timeout
        hard = timeout + grace(timeout) if timeout else None
        wait = Backoff(self.max_sleep)
        while True:
            if not m.inflight and not self._incoming:
                if not m.queue or m.halted:
                    break
                self._fill(m)
                if not m.inflight:
                    if not m.halted:  # tasks left and every rank retired: fails in either on_error mode
                        last = next(w for w in reversed(self.pool) if w.state is State.RETIRED)
                        m.failure = Failure(
                            m.queue[0],
                            last.rank,
                            last.host,
                            "RuntimeError: no worker rank left "
                            "to run the remaining tasks (every one stopped answering)\n",
                            timeout=True,
                        )
                    break
            event = self.outbox.progress()
            event = self._receive(m) or event
            if event:
                wait.reset()
                wait.max_sleep = min(max(self.max_sleep, self.POLL_FRACTION * self._typical), self.MAX_POLL)
                # a coordinator that woke every 10 µs spent a third of its CPU on empty polls
                wait.first = min(max(1e-5, self.FIRST_POLL_FRACTION * self._typical), 1e-3)
            elif hard is not None and self._retire_silent(m, hard):
                self._fill(m)
            else:
                wait.sleep()
        s = m.stats
        s.wall = time.perf_counter() - t0
        s.idle = max(self.n_workers * s.wall - m.busy, 0.0)
        s.coordinator_cpu = time.process_time() - cpu0
        self.last_stats = s
        if m.failure is not None:
            raise TaskFailed(m.failure)
        if m.interrupted or not all(m.done):
            raise FarmInterrupted()
        return Results(m.results, m.failures, s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.retired:
            return  # the job ends with MPI_Abort (abort_if_abandoned): STOP could block on a hung rank
        stop = Frame(None)
        for w in self.pool:
            self.outbox.send_frame(stop, w.rank, Tag.STOP)
        self.outbox.drain(self.max_sleep, until=time.perf_counter() + 60.0)
