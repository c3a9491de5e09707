"""How a run is started and executed, from the command line (``evolve``) or from Python
(:func:`synapto.evolve`): the options of ``evolve`` that are no field of
:class:`synapto.evolution.config.EvolveConfig` -- the strategy's :class:`Shorthands`, the run's
own :class:`EvolveRun` and :class:`RunOptions` -- declared once (:mod:`synapto.common.declare`), and
the panels of ``evolve``'s help."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from synapto.common.declare import names, opt
from synapto.common.errors import UsageError, option

#: the panels of ``evolve``'s help
RUN, SEARCH, CHOOSE = "The run", "Strategy", "Validation, selection, test"
EXEC, TRACK = "Execution", "Tracking"


@dataclass(frozen=True)
class Shorthands:
    """Strategy options with a flag (and a config key) of their own; a run lays them into
    its ``strategy_options`` (:func:`strategy_options`)."""

    sigma: float | None = opt(
        None,
        help="openai-es, pgpe, cmaes: (initial) std of the search distribution.",
        show_default="0.1 (the default experiment's cmaes; openai-es, pgpe: 0.1)",
        panel=SEARCH,
        config=True,
        after="strategy",
    )
    lr: float | None = opt(
        None,
        help="openai-es: Adam's step size on the centre; ars: the step size.",
        show_default="0.03 (openai-es)",
        panel=SEARCH,
        config=True,
        after="sigma",
    )
    prune: str | None = opt(
        None,
        help="on: the agent prunes connections between generations (synaptolysis); off: dense.",
        show_default="on",
        panel=SEARCH,
        config=True,
        after="lr",
    )
    mutation_std: float | None = opt(
        None,
        help="ga: std of the Gaussian perturbation of surviving weights; 0 keeps pure pruning.",
        show_default="0.5",
        panel=SEARCH,
        config=True,
        after="prune",
    )


#: the longest --task-timeout (about 116 days): the interval timer's own limit is near 1e9 s
MAX_TASK_TIMEOUT = 1e7


@dataclass(frozen=True)
class EvolveRun:
    """How a run is started: its config file, run file, workers, restarts, time limits and
    tracking; none of these change its results (:class:`RunOptions` neither).  Checked on
    creation (one line, exit 2)."""

    config: Path | None = opt(
        None,
        help="TOML file of options, or the name of a shipped one (quickstart, lunarlander_learn, bipedal_solve, "
        "bipedal_hebbian_dag, bipedal_learn); command-line options override it.",
        panel=RUN,
        show_default=False,
    )
    out: Path | None = opt(
        None,
        help="Run file (.h5); with several seeds _s<seed> is inserted before .h5.",
        show_default="runs/<env>_<agent>_s<seed>.h5",
        panel=RUN,
        config=True,
    )
    force: bool = opt(False, help="Overwrite an existing run file.", flags=("--force",), panel=RUN)
    resume: Path | None = opt(
        None,
        help="Continue RUN.h5 from its last checkpoint (any number of ranks). Options that would change "
        "the run are refused; --generations and --max-env-steps set a new budget: raise them to extend a "
        "run (a finished one too), or give a lower --max-env-steps to end it sooner (at or below the env "
        "steps it holds, it goes straight to its final selection and test).",
        panel=RUN,
        show_default=False,
    )
    workers: int = opt(
        0,
        help="Worker processes: relaunch under `mpiexec -n N+1` (ignored when already under MPI). "
        "0 runs in this process.",
        panel=EXEC,
        config=True,
    )
    restarts: int = opt(
        3,
        help="With --workers (and the Slurm script): when a rank is lost (killed, a segfault, a node gone), "
        "start the job again, continuing the run from its last checkpoint, at most this many times; "
        "the run file is the uninterrupted run's. 0: the job stops and prints the resume command. "
        "Never for bad input, an evaluation that raises, or a signal.",
        panel=EXEC,
    )
    task_timeout: float | None = opt(
        None,
        help="Seconds an evaluation task may take (one individual, or a chunk of them under --batch); "
        "one that overruns fails as if it raised (see --on-error). A worker rank that stops "
        "answering gets no more tasks; the MPI job then ends with MPI_Abort.",
        show_default="off",
        panel=EXEC,
        config=True,
        after="wire",
    )
    check: bool = opt(
        False,
        help="Check the options, the config and the output path, print what would run, and exit "
        "without running or writing anything.",
        flags=("--check",),
        panel=EXEC,
        after="task_timeout",
    )
    tensorboard: Path | None = opt(
        None,
        help="Write every generation's statistics as TensorBoard scalars into this folder, stepped by env "
        "steps (run/generation: the generation; needs the tensorboard extra).",
        show_default="off",
        panel=TRACK,
    )
    live_log: Path | None = opt(
        None,
        help="Append every generation's statistics to this file as it runs: .csv (a header, one row per "
        "generation) or .jsonl (one JSON object per generation).",
        show_default="off",
        panel=TRACK,
    )

    def __post_init__(self):
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise UsageError(f"{option('workers')} must be an integer >= 0, got {self.workers!r}")
        if self.out is not None and not isinstance(self.out, (str, Path)):
            raise UsageError(f"--out must be a file path, got {self.out!r}")
        if self.out is not None:  # (a config file's is text)
            object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "task_timeout", check_task_timeout(self.task_timeout))
        if isinstance(self.restarts, bool) or not isinstance(self.restarts, int) or self.restarts < 0:
            raise UsageError(f"--restarts must be an integer >= 0, got {self.restarts!r}")


def check_task_timeout(value) -> float | None:
    """``--task-timeout`` / ``task_timeout``: None (off) or a number of seconds in
    (0, :data:`MAX_TASK_TIMEOUT`]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= MAX_TASK_TIMEOUT):
        raise UsageError(f"--task-timeout must be a number of seconds in (0, {MAX_TASK_TIMEOUT:,.0f}], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RunOptions:
    """How a run is executed; none of these change its results.  Validated on creation:
    a bad value is a one-line :class:`UsageError` naming the command-line option."""

    on_error: str = opt(
        "abort",
        help="abort: an evaluation that raises stops the run (checkpoint kept, replay command printed); "
        "skip: that individual gets fitness -inf and the run goes on.",
        panel=EXEC,
    )
    checkpoint_every: int = opt(1, help="Generations between checkpoints.", panel=EXEC)
    schedule: str = opt(
        "dynamic",
        help="dynamic: a worker gets its next individual as soon as it is free; waves: the reference's "
        "blocking waves (one individual per worker, all wait for the slowest). Results are identical.",
        panel=EXEC,
    )
    batch: str = opt(
        "auto",
        help="auto: where the env has a numpy-batched implementation (e.g. CartPole-v1) and the agent a "
        "batched policy, evaluate chunks of individuals x episodes in lockstep; off: one env at a time.",
        panel=EXEC,
    )
    wire: str = opt(
        "keys",
        help="keys: for openai-es, pgpe and separable cmaes, workers get each generation's centre once and "
        "a task carries only its sample's noise key; genomes: every task carries its genome. Results "
        "are identical.",
        panel=EXEC,
    )
    progress_every: float | None = opt(
        None,
        help="Seconds between two progress lines of a phase where the output is no terminal (a log file, "
        "a pipe, --workers); 0: a line per result.",
        show_default="$SYNAPTO_PROGRESS_EVERY, else 20",
        panel=TRACK,
        after="live_log",
    )

    def __post_init__(self):
        if self.schedule not in ("dynamic", "waves"):
            raise UsageError(f"{option('schedule')} must be 'dynamic' or 'waves', got {self.schedule!r}")
        if self.on_error not in ("abort", "skip"):
            raise UsageError(f"{option('on_error')} must be 'abort' or 'skip', got {self.on_error!r}")
        if self.checkpoint_every < 1:
            raise UsageError(f"{option('checkpoint_every')} must be >= 1, got {self.checkpoint_every}")
        if self.batch not in ("auto", "off"):
            raise UsageError(f"{option('batch')} must be 'auto' or 'off', got {self.batch!r}")
        if self.wire not in ("keys", "genomes"):
            raise UsageError(f"{option('wire')} must be 'keys' or 'genomes', got {self.wire!r}")
        every = self.progress_every
        if every is not None and (isinstance(every, bool) or not isinstance(every, (int, float)) or not every >= 0):
            raise UsageError(f"{option('progress_every')} must be a number of seconds >= 0, got {every!r}")


#: strategy options that have a command-line flag (and a top-level config key) of their own
STRATEGY_SHORTHANDS = names(Shorthands)
#: keys of an ``evolve`` config file that say how a run is executed, not what it computes
EVOLVE_RUN_KEYS = frozenset(names(EvolveRun, config=True))


def _check_share(share) -> None:
    """``population_per_worker``: None (the population was given as such) or an integer >= 1."""
    if share is not None and (isinstance(share, bool) or not isinstance(share, int) or share < 1):
        raise UsageError(f"--population-per-worker must be an integer >= 1, got {share!r}")


def resolve_population(values: dict, workers) -> None:
    """Resolve ``values["population_per_worker"]`` (a run's values, in place) once, at the
    start: ``population`` = per worker x ``workers`` (1 in a serial run, ``workers`` = 0), the
    per-worker value kept for information.  The run file records the resolved population, so
    ``--resume``, replay and the same config on any number of ranks compute the same run.
    One line (exit 2): a value below 1, or a population given too."""
    per_worker = values.get("population_per_worker")
    if per_worker is None:
        return
    _check_share(per_worker)
    if "population" in values:
        raise UsageError(
            "--population and --population-per-worker exclude each other: give the population "
            "or its share per worker, not both"
        )
    count = workers if isinstance(workers, int) and not isinstance(workers, bool) and workers > 1 else 1
    if per_worker * count < 2:
        raise UsageError(
            f"--population-per-worker {per_worker} x {count} worker(s) is a population of {per_worker * count}; "
            f"it must be >= 2"
        )
    values["population"] = per_worker * count
