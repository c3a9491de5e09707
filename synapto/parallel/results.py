"""A task farm's interface (:class:`Farm`) and what its ``map`` gives back: :class:`Results`
(in task order) with each failed task's :class:`Failure` and the map's :class:`MapStats`,
and the two ways a map ends early, :class:`TaskFailed` and :class:`FarmInterrupted`.

Both farms (:class:`~synapto.parallel.farm.SerialFarm`, the coordinator's
:class:`~synapto.parallel.coordinator.MPIFarm`), the wrappers around them and their
callers share these types, so they live below all: this module imports nothing else of
:mod:`synapto.parallel`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


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


class Recipe(Protocol):
    """What a farm is set up with: picklable; each worker builds its handler from it once (an
    env and an agent, say): ``handler(payload)``, or ``handler(payload, context)``."""

    def build(self) -> Callable[..., Any]: ...


class Farm(Protocol):
    """Maps a list of tasks to results, in this process or over MPI: the farms and every
    wrapper of one, so that the evolution loop, replay and the tests do not care which runs."""

    n_workers: int  #: processes that evaluate tasks
    #: tasks run in the caller's process: a caller that holds the genomes passes them as they
    #: are rather than what rebuilds them (noise keys, lineages), which would only cost time
    in_process: bool

    def setup(self, spec: Recipe) -> None:
        """Every worker builds its handler from ``spec``."""

    def map(
        self,
        payloads: Sequence,
        schedule: str = "dynamic",
        stop: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
        on_error: str = "raise",
        context: Any = None,
    ) -> Results:
        """The results in the order of ``payloads``, whatever order they arrive in, with each
        failed task's :class:`Failure` (``on_error="skip"``; ``"raise"``: :class:`TaskFailed`)
        and the map's :class:`MapStats`.  With a ``context`` the handler is called as
        ``handler(payload, context)``: data the tasks share (an ES generation's centre and
        noise keys), which an MPI farm sends to each worker once per map.  ``stop()``
        returning True ends the map after the tasks in flight (:class:`FarmInterrupted`);
        ``progress(done, total)`` follows the results; ``schedule``: "dynamic" or "waves"."""

    def close(self) -> None:
        """Explicit shutdown; idempotent."""
