"""How far a run has come: its budget, an estimate of the time left, and live progress.

A run's budget is its generations, or its env steps when ``max_env_steps`` is set
(then the generations are only an upper bound).  :class:`Budget` turns what a run has
done into a fraction of it; :class:`Eta` into the time left, at the pace of the
generations since this process's first (whose start-up would skew it), and only once
:data:`ETA_AFTER` generations have run.  :class:`RunProgress` shows the run's progress:
rich's progress bars on a terminal (the run's budget, and the evaluations of the
current phase), and elsewhere -- a pipe, a log file, any run under ``--workers N``,
whose output reaches the terminal through ``mpiexec`` -- a plain line every
``$SYNAPTO_PROGRESS_EVERY`` seconds (:data:`PLAIN_EVERY` by default) while one phase
(a generation's training or validation, the final selection, the champion test) runs
longer than that.  :func:`progress_line` is each generation's log line.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from synapto.common.errors import UsageError
from synapto.evolution.generation import num
from synapto.parallel.launch import under_mpi

#: generations this process runs before its progress lines show an eta
ETA_AFTER = 3
#: seconds between two plain progress lines of one phase (``$SYNAPTO_PROGRESS_EVERY``)
PLAIN_EVERY = 20.0
#: what a phase's evaluations are called in the progress lines, by phase
PHASES = {
    "training": "generation {g} training",
    "validation": "generation {g} validation",
    "selection": "final selection",
    "test": "champion test",
}


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

    def status(self, generations: int, env_steps: int) -> str:
        """How much of the budget that ends the run first is done: ``1,234,567 of 3,000,000
        env steps`` or ``56 of 100 generations``."""
        if self.max_env_steps and env_steps / self.max_env_steps >= generations / self.generations:
            return f"{env_steps:,} of {self.max_env_steps:,} env steps"
        return f"{generations:,} of {self.generations:,} generations"

    def describe(self) -> str:
        if self.max_env_steps:
            return f"up to {self.max_env_steps:,} env steps (at most {self.generations:,} generations)"
        return f"{self.generations:,} generation{'s' if self.generations != 1 else ''}"


class Eta:
    """The time a run has left, at the pace of this process's generations after its first.

    The first generation of a process carries its start-up (spawning the envs, the first
    calls), and a run's first generations take fewer env steps than its later ones; so the
    pace is measured from the end of the process's first generation, in the fraction of
    the binding budget (:meth:`Budget.fraction`: env steps when ``max_env_steps`` ends the
    run first), and no eta is given before ``after`` generations have run."""

    def __init__(self, budget: Budget, after: int = ETA_AFTER):
        self.budget, self.after = budget, max(after, 2)
        self.seen = 0
        self.mark: tuple[float, float] | None = None  #: (elapsed, fraction) at the end of the first generation

    def __call__(self, generations: int, env_steps: int, elapsed: float) -> float | None:
        """Seconds left after a generation ended ``elapsed`` seconds into this process."""
        fraction = self.budget.fraction(generations, env_steps)
        self.seen += 1
        if self.mark is None:
            self.mark = (elapsed, fraction)
        if self.seen < self.after:
            return None
        t0, f0 = self.mark
        gained = fraction - f0
        if gained <= 0 or elapsed <= t0:
            return None
        return (elapsed - t0) * (1.0 - fraction) / gained


def plain_every() -> float:
    """Seconds between two plain progress lines of one phase: ``$SYNAPTO_PROGRESS_EVERY``
    (a number >= 0; 0 prints every result) or :data:`PLAIN_EVERY`."""
    raw = os.environ.get("SYNAPTO_PROGRESS_EVERY", "").strip()
    if not raw:
        return PLAIN_EVERY
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"$SYNAPTO_PROGRESS_EVERY must be a number of seconds >= 0, got {raw!r}")
    return value


def plain_output(stream) -> bool:
    """Whether progress goes out as plain lines: ``stream`` is not a terminal, or this
    process runs under MPI (its output reaches the terminal through ``mpiexec``)."""
    return under_mpi() or not (hasattr(stream, "isatty") and stream.isatty())


class PlainProgress:
    """A phase's progress as plain lines through ``log``: one after ``every`` seconds in a
    phase, then one every ``every`` seconds, while it runs (nothing for a shorter phase)."""

    def __init__(self, log: Callable[[str], None], every: float, clock: Callable[[], float] = time.monotonic):
        self.log, self.every, self.clock = log, every, clock
        self.name, self.unit = "evaluations", "evaluations"
        self.started = self.last = clock()

    def phase(self, phase: str, generation: int) -> None:
        self.name = PHASES.get(phase, phase).format(g=generation)
        self.unit = "episodes" if phase == "test" else "evaluations"
        self.started = self.last = self.clock()

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done >= total or now - self.last < self.every:
            return
        self.last = now
        spent = now - self.started
        left = f", eta {fmt_time(spent * (total - done) / done)}" if done else ""
        self.log(f"  {self.name}: {done:,}/{total:,} {self.unit}, {fmt_time(spent)}{left}")


class RunProgress:
    """rich progress bars on a terminal: the run's budget with its :class:`Eta`, and the current
    phase's evaluations; elsewhere (:func:`plain_output`) a :class:`PlainProgress` through
    ``log``.  Calling it with ``(done, total)`` updates the phase (the farm's progress
    callback), :meth:`phase` names it; :meth:`advance` updates the run's budget."""

    def __init__(self, budget: Budget, stream=None, log: Callable[[str], None] | None = None, every=None):
        self.budget = budget
        stream = stream or sys.stdout
        every = plain_every() if every is None else every  # --progress-every, else the environment's
        self.plain = PlainProgress(log, every) if log is not None and plain_output(stream) else None
        self.enabled = not plain_output(stream)
        self.progress = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                console=Console(file=stream),
                transient=True,
            )
            self.run_task = self.progress.add_task("run", total=budget.total, unit=budget.unit, eta="")
            self.gen_task = self.progress.add_task("generation", total=1, unit="evaluations", visible=False, eta="")

    def start(self, generations: int, env_steps: int) -> RunProgress:
        if self.progress is not None:
            self.progress.start()
            self.progress.update(self.run_task, completed=self.budget.done(generations, env_steps))
        return self

    def advance(self, generations: int, env_steps: int, eta: float | None = None) -> None:
        """The run's progress after a generation, and its time left (:class:`Eta`; None: not yet)."""
        if self.progress is not None:
            left = "" if eta is None else f"eta {fmt_time(eta)}"
            self.progress.update(self.run_task, completed=self.budget.done(generations, env_steps), eta=left)

    def phase(self, phase: str, generation: int) -> None:
        """The evaluations that follow are ``phase``'s (training, validation, selection, test)."""
        if self.plain is not None:
            self.plain.phase(phase, generation)
        if self.progress is not None:
            name = PHASES.get(phase, phase).format(g=generation)
            self.progress.update(self.gen_task, description=name, completed=0)

    def __call__(self, done: int, total: int) -> None:
        if self.plain is not None:
            self.plain(done, total)
        if self.progress is not None:
            self.progress.update(self.gen_task, completed=done, total=max(total, 1), visible=True)

    def clear(self) -> None:
        if self.progress is not None:
            self.progress.update(self.gen_task, visible=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def progress_line(cfg, run, gen, stats: dict, elapsed: float, eta: float | None = None) -> str:
    """One generation's log line; ``gen`` counts from 0, as the run file, the CSV export and
    ``replay --generation`` do, and the percentage is of the run's budget.  When training is
    shaped, its figures are labelled ``train(shaped)`` and put before the validation's
    (``val``: the unmodified task)."""
    val = f"val {num(stats['validation_best'])}  " if gen.validation.fitness.size else ""
    t_eval = gen.timing["eval_wall"]
    budget = Budget(cfg.generations, cfg.max_env_steps)
    pct = 100 * budget.fraction(run.generation, run.env_steps + run.validation_steps)
    best, mean = f"best {num(stats['best_fitness'])}  ", f"mean {num(stats['pop_mean'])}  "
    figures = f"train(shaped) {best}{mean}{val}" if shaping_words(cfg) else f"{best}{val}{mean}"
    return (
        f"gen {gen.index:>4} {pct:5.1f}%  {figures}conn {stats['connections_mean']:8.1f}  "
        f"steps {run.env_steps + run.validation_steps:>10,}  "
        f"{int(gen.steps.sum()) / max(t_eval, 1e-9):9,.0f} steps/s  "
        f"elapsed {fmt_time(elapsed)}" + (f"  eta {fmt_time(eta)}" if eta is not None else "")
    )


def shaping_words(cfg) -> str:
    """``fall_reward=0, stall_steps=50``: the env options by which a run's training episodes
    differ from its task (``reward_shift`` and :mod:`synapto.shaping`'s); "" when none."""
    envs = cfg.envs
    words = [f"reward_shift={envs.reward_shift:g}"] if envs.reward_shift else []
    words += [
        f"{f.name}={getattr(envs.shaping, f.name):g}"
        for f in dataclasses.fields(envs.shaping)
        if getattr(envs.shaping, f.name) != f.default
    ]
    return ", ".join(words)
