"""A worker rank's loop: build the handler, run tasks, send results, until STOP.

The worker never lets an exception escape: a task that raises (or runs past the task
timeout, :mod:`synapto.parallel.deadline`) is answered with ``ERROR`` and its
traceback, rank and host; the coordinator decides.  A result is sent with ``isend``
and completed (polling, not spinning) before the next task starts, so the coordinator
learns at once that this worker is free and no rendezvous waits on a worker deep in
an episode.  Messages: :mod:`synapto.parallel.wire`.
"""

from __future__ import annotations

import gc
import socket
import time
import traceback

from synapto.parallel.deadline import Deadline, run_task
from synapto.parallel.stopping import ignore_in_worker
from synapto.parallel.wire import Backoff, Outbox, Tag, receive


def serve(comm, max_sleep: float = 1e-3, task_timeout: float | None = None) -> None:
    """Serve the coordinator (rank 0) until it sends STOP."""
    from mpi4py import MPI

    ignore_in_worker()  # the coordinator decides when workers stop
    status = MPI.Status()
    rank = comm.Get_rank()
    host = socket.gethostname()
    comm.gather(host, root=0)  # MPIFarm.hosts
    deadline = Deadline(task_timeout)
    outbox = Outbox(comm)
    wait = Backoff(max_sleep)
    handler = None
    setup_error: str | None = None
    context_id, context = None, None
    t_free = time.perf_counter()
    while True:
        msg, tag, _ = receive(comm, status, 0, wait)
        if tag == Tag.STOP:
            outbox.drain(max_sleep)
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
        if tag == Tag.CONTEXT:
            context_id, context = msg  # the tasks of one map share it; the previous map's is done
            continue
        if tag != Tag.TASK:  # pragma: no cover - protocol violation
            raise RuntimeError(f"worker {rank}: unexpected tag {tag}")
        index, ctx, payload = msg
        t_start = time.perf_counter()
        idle = t_start - t_free
        if handler is None:
            error = ("RuntimeError: worker setup failed:\n" + (setup_error or "no setup received"), False)
        elif ctx is not None and ctx != context_id:  # pragma: no cover - protocol violation
            error = (f"RuntimeError: task {index} needs context {ctx}, this worker holds {context_id}\n", False)
        else:
            value, error = run_task(handler, payload, deadline, context if ctx is not None else None)
        if error is not None:
            outbox.send((index, rank, host, *error), 0, Tag.ERROR)
        else:
            outbox.send((index, value, time.perf_counter() - t_start, idle), 0, Tag.RESULT)
        outbox.drain(max_sleep)
        t_free = time.perf_counter()
