"""How far a run has come: its budget, an estimate of the time left, and a live bar.

A run's budget is its generations, or its env steps when ``max_env_steps`` is set
(then the generations are only an upper bound).  :class:`Budget` turns what a run has
done into a fraction of it and an estimated time left; :class:`RunProgress` shows it
with rich's progress bars on a terminal (the run's budget, and the evaluations of the
current generation) and stays silent elsewhere, where the per-generation log lines
carry the same figures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


def fmt_time(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass(frozen=True)
class Budget:
    """What ends a run: ``generations``, or ``max_env_steps`` (training + validation) when set."""

    generations: int
    max_env_steps: int = 0

    @property
    def unit(self) -> str:
        return "env steps" if self.max_env_steps else "generations"

    @property
    def total(self) -> int:
        return self.max_env_steps or self.generations

    def done(self, generations: int, env_steps: int) -> int:
        return min(env_steps, self.max_env_steps) if self.max_env_steps else generations

    def fraction(self, generations: int, env_steps: int) -> float:
        if self.max_env_steps:  # whichever ends the run first
            return min(1.0, max(env_steps / self.max_env_steps, generations / self.generations))
        return min(1.0, generations / self.generations)

    def eta(self, generations: int, env_steps: int, elapsed: float, start_fraction: float = 0.0) -> float | None:
        """Seconds left at the pace since this process started (None before any progress)."""
        frac = self.fraction(generations, env_steps)
        gained = frac - start_fraction
        if gained <= 0:
            return None
        return elapsed * (1.0 - frac) / gained

    def describe(self) -> str:
        if self.max_env_steps:
            return f"up to {self.max_env_steps:,} env steps (at most {self.generations:,} generations)"
        return f"{self.generations:,} generation{'s' if self.generations != 1 else ''}"


class RunProgress:
    """rich progress bars on a terminal: the run's budget with an ETA, and the current
    generation's evaluations.  Calling it with ``(done, total)`` updates the latter (the
    farm's progress callback); :meth:`advance` the former."""

    def __init__(self, budget: Budget, stream=None):
        self.budget = budget
        stream = stream or sys.stdout
        self.enabled = hasattr(stream, "isatty") and stream.isatty()
        self.progress = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(file=stream),
                transient=True,
            )
            self.run_task = self.progress.add_task("run", total=budget.total, unit=budget.unit)
            self.gen_task = self.progress.add_task("generation", total=1, unit="evaluations", visible=False)

    def start(self, generations: int, env_steps: int) -> RunProgress:
        if self.progress is not None:
            self.progress.start()
            self.progress.update(self.run_task, completed=self.budget.done(generations, env_steps))
        return self

    def advance(self, generations: int, env_steps: int) -> None:
        if self.progress is not None:
            self.progress.update(self.run_task, completed=self.budget.done(generations, env_steps))

    def __call__(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress.update(self.gen_task, completed=done, total=max(total, 1), visible=True)

    def clear(self) -> None:
        if self.progress is not None:
            self.progress.update(self.gen_task, visible=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
