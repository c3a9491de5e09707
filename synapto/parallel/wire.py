"""What goes over MPI between the coordinator and its workers, and how it goes without
ever holding the sender.

Messages (tag, content), coordinator -> worker:

==========  ============================================================
``SETUP``   the handler's recipe (an object with ``build()``)
``CONTEXT`` ``(id, object)``: data shared by the tasks of one map (an ES
            generation's centre, sigma and noise keys; a GA generation's
            lineage: its distinct parents, pruned bits and noise keys); sent
            once per worker and map, before the worker's first task of that map
``BUFFER``  raw bytes of an array of the frame sent just before
``TASK``    ``(index, context id or None, payload)``
``STOP``    ``None``: leave the worker loop
==========  ============================================================

worker -> coordinator: ``RESULT (index, value, compute seconds, idle seconds)`` or
``ERROR (index, rank, host, traceback, timed_out)``.

The coordinator's messages go as :class:`Frame` s: pickled once (protocol 5), with the
numpy arrays they hold sent out of band from their own memory (``BUFFER`` messages
right after their frame), so a large genome costs the coordinator no copy before MPI's
own, and a map's context is pickled once for all workers.  Results are mpi4py's
pickled objects, matched with ``improbe`` and received with ``irecv``.

Why non-blocking.  MPI sends small messages eagerly and larger ones by rendezvous: a
blocking ``send`` of more than a few KB returns only once the receiver has posted its
receive -- for a worker busy with an episode, once the episode ends.  Measured with
the MPICH that ``make install`` brings: a 4.8 KB send returns at once, an 8 KB one
after the receiver's 300 ms of work, with the sender spinning on a core meanwhile.  So
every send here is an ``isend`` kept in an :class:`Outbox` until MPI completes it, and
every receive on the coordinator is matched (``improbe``) and then posted as an
``irecv``: nothing waits for a busy peer, whatever the message size or the MPI
build's eager limit.

Neither side spins in MPI while it waits: :class:`Backoff` sleeps between polls, from
10 µs doubling to ``max_sleep``, and starts again at 10 µs after any event.  Workers poll
at most 1 ms apart; the coordinator at most 1 ms apart or a twentieth of a typical task
(20 ms at most), so that serving workers whose tasks take seconds costs it almost no CPU
(a result above the eager limit waits at most that long for the coordinator to take it).
"""

from __future__ import annotations

import pickle
import time
from enum import IntEnum


class Tag(IntEnum):
    SETUP = 11
    TASK = 12
    RESULT = 13
    ERROR = 14
    STOP = 15
    CONTEXT = 16
    BUFFER = 17  #: an out-of-band buffer of the Frame just sent (see :class:`Frame`)


class Backoff:
    """Sleeps between polls: ``first`` (10 µs) doubling to ``max_sleep``; :meth:`reset` after
    an event."""

    __slots__ = ("delay", "first", "max_sleep")

    def __init__(self, max_sleep: float = 1e-3):
        self.max_sleep = max_sleep
        self.first = self.delay = 1e-5

    def reset(self) -> None:
        self.delay = self.first

    def sleep(self) -> None:
        time.sleep(self.delay)
        self.delay = min(self.delay * 2.0, self.max_sleep)


class Frame:
    """A message pickled once (protocol 5): ``head`` is a 4-byte count of out-of-band buffers
    followed by the pickle, ``buffers`` are the contiguous numpy arrays it refers to,
    sent from their own memory -- so a 1 MB genome costs the sender no copy of its own,
    and a context sent to every worker is pickled once."""

    __slots__ = ("buffers", "head")

    def __init__(self, obj):
        buffers: list = []
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        self.buffers = [b.raw() for b in buffers]
        self.head = len(self.buffers).to_bytes(4, "little") + data


class Outbox:
    """Sends that MPI has not completed yet, with the buffers they read from.

    :meth:`send` and :meth:`send_frame` never wait for the receiver; :meth:`progress`
    completes what MPI can (it also drives MPI's progress engine, which moves rendezvous
    data).  A buffer is released only once its send completed."""

    def __init__(self, comm):
        from mpi4py import MPI

        self.comm = comm
        self._MPI = MPI
        self.requests: list = []
        self.buffers: list = []  #: kept alive while their send is pending (None for mpi4py's own)

    def send(self, obj, dest: int, tag: int) -> None:
        """Start sending ``obj`` pickled by mpi4py (read with a plain ``recv``): results."""
        self.requests.append(self.comm.isend(obj, dest=dest, tag=tag))
        self.buffers.append(None)

    def send_frame(self, frame: Frame, dest: int, tag: int) -> None:
        """Start sending a :class:`Frame` (read with :func:`receive`): the coordinator's messages."""
        MPI = self._MPI
        self.requests.append(self.comm.Isend([frame.head, MPI.BYTE], dest=dest, tag=tag))
        self.buffers.append(frame)
        for b in frame.buffers:
            self.requests.append(self.comm.Isend([b, MPI.BYTE], dest=dest, tag=Tag.BUFFER))
            self.buffers.append(frame)

    def progress(self) -> bool:
        """Drop the completed sends; True if any completed."""
        if not self.requests:
            return False
        done = self._MPI.Request.Testsome(self.requests)
        if not done:
            return False
        for i in sorted(done, reverse=True):
            del self.requests[i]
            del self.buffers[i]
        return True

    def drain(self, max_sleep: float = 1e-3, until: float | None = None) -> bool:
        """Wait (polling, not spinning) until every send completed, or ``time.perf_counter()``
        passes ``until``; True if all completed."""
        wait = Backoff(max_sleep)
        while self.requests:
            if not self.progress():
                if until is not None and time.perf_counter() > until:
                    return False
                wait.sleep()
        return True

    def __len__(self) -> int:
        return len(self.requests)


def receive(comm, status, source: int, wait: Backoff):
    """The next :class:`Frame` from ``source``, unpickled: ``(object, tag, source)``; polls
    without spinning."""
    from mpi4py import MPI

    while True:
        msg = comm.improbe(source=source, tag=MPI.ANY_TAG, status=status)
        if msg is not None:
            break
        wait.sleep()
    wait.reset()
    src, tag = status.Get_source(), status.Get_tag()
    head = bytearray(status.Get_count(MPI.BYTE))
    msg.Recv([head, MPI.BYTE])
    buffers = []
    for _ in range(int.from_bytes(head[:4], "little")):  # its buffers follow it, in order
        part = comm.mprobe(source=src, tag=Tag.BUFFER, status=status)
        buf = bytearray(status.Get_count(MPI.BYTE))
        part.Recv([buf, MPI.BYTE])
        buffers.append(buf)
    return pickle.loads(memoryview(head)[4:], buffers=buffers), tag, src
