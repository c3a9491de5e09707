"""TensorBoard event files of ``--tensorboard``: written in this process, one flushed
record per scalar, and read back for the steps a folder holds.

An event file is a sequence of records (TFRecord framing: length, its checksum, the data,
its checksum), each an ``Event`` protocol buffer; the first names the file version, the
others carry a ``Summary`` of scalars at a step.  The records and protocol buffers are
tensorboardX's (the ``tensorboard`` extra); its ``SummaryWriter`` is not used: it writes
from a thread of its own and closes at exit, so a full disk surfaced there again, as two
tracebacks after the run's one-line error.  Here a failed write is the caller's
``OSError`` and :meth:`EventFile.discard` drops the file quietly.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path

#: the names of event files, as TensorBoard looks for them
PATTERN = "events.out.tfevents.*"


class EventFile:
    """A new event file in ``folder`` (made if needed), open for appending scalars."""

    def __init__(self, folder: Path):
        from tensorboardX.proto import event_pb2
        from tensorboardX.record_writer import RecordWriter

        self._event = event_pb2.Event
        folder.mkdir(parents=True, exist_ok=True)
        base = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        path, n = folder / base, 0
        while path.exists():  # a resumed run within the same second: never over an earlier file
            n += 1
            path = folder / f"{base}.{n}"
        self.path = path
        self._writer: RecordWriter | None = RecordWriter(str(path))
        self._write(self._event(wall_time=time.time(), file_version="brain.Event:2"))

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """One event of the scalars ``values`` (name: value) at ``step``, flushed to disk."""
        from tensorboardX.proto import summary_pb2

        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()]
        )
        self._write(self._event(wall_time=time.time(), step=int(step), summary=summary))
        assert self._writer is not None
        self._writer.flush()

    def _write(self, event) -> None:
        assert self._writer is not None, "a closed event file"
        self._writer.write(event.SerializeToString())

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def discard(self) -> None:
        """Close after a failed write, saying nothing: that failure was reported."""
        try:
            self.close()
        except OSError:
            pass


def steps_held(folder: Path, tag: str | None = None) -> set[int]:
    """The steps at which the event files of ``folder`` hold scalars, or with ``tag`` the
    values of that scalar (``"run/generation"``: the generations held, whatever the step);
    a record cut short by a kill, and whatever follows it in that file, is not read."""
    from tensorboardX.proto import event_pb2

    steps: set[int] = set()
    for path in sorted(folder.glob(PATTERN)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            end = at + 12 + length
            if end + 4 > len(data):
                break
            try:
                event = event_pb2.Event.FromString(data[at + 12 : end])
            except Exception:  # a damaged record: the rest of the file is not trusted
                break
            if event.HasField("summary") and len(event.summary.value):
                if tag is None:
                    steps.add(int(event.step))
                else:
                    steps.update(int(v.simple_value) for v in event.summary.value if v.tag == tag)
            at = end + 4
    return steps
