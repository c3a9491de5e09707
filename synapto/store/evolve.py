"""The evolution run file: written by the coordinator only.

The file is created whole (built beside its path, fsync-ed, renamed into place) with
every dataset at its final size: one row per generation of the run, one chunk per row,
filled with NaN (floats) or 0.  After each generation its rows are written in place and
flushed, and only then is the counter ``/completed`` advanced and flushed.  Nothing
else in the file changes, so a writer killed at any instant leaves a file every HDF5
reader opens (see :mod:`synapto.store.files`).  Readers trust ``/completed``, never the
datasets' lengths: rows past it are fill or belong to a generation that did not finish.
The final selection's datasets, whose size is known only at the end, are written by
rebuilding the file once (:meth:`EvolveRunWriter.write_selection`).

Layout (G generations, P individuals, E episodes, n genome length, T test episodes)::

    /                   attrs: format="synapto-run", format_version, kind="evolve",
                        config (JSON), versions (JSON), created (ISO time), run_id (random hex,
                        also in the checkpoint), n_params, agent_name, action_range
    /completed          (1,)  int64   generations fully written
    /fitness            (G, P) float64  fitness (mean return - penalty; -inf if non-finite)
    /returns            (G, P, E) float64  return of each episode
    /steps              (G, P) int64    env steps of each evaluation
    /seeds              (G, P, E) int64  env.reset seeds of each episode
    /population         (G, P, n) float64  the genomes evaluated (0 = pruned); absent where
                                        /samples describes them
    /samples/...        a centre strategy's generations (openai-es, pgpe, separable cmaes):
                        keys (G, R, 6) uint64, sigma (G,) or (G, n), scale (G, n) for "scaled";
                        with /strategy/centre and the root attribute ``samples`` (the kind)
                        they rebuild every genome exactly (:class:`synapto.common.noise.Samples`,
                        :meth:`synapto.store.RunData.population`) in O(n) per generation
    /samples/...        or a GA's generations as lineages (root attributes ``samples="lineage"``,
                        ``lineage_bounds``, the segments, JSON): refs (G, 2k+1, 2) int64 the
                        parents' (generation, row), origin (G, P, S) int64 each segment's parent
                        (-1: generation 0, redrawn from its key), pruned (G, P, ceil(n/8)) uint8
                        bits, keys (G, P, 6) uint64 the perturbations' noise keys, std (G,),
                        assign (G,) (:class:`synapto.lineage.Lineage`) in O(P) per generation
    /connections        (G, P) int64    surviving connections
    /nonfinite          (G, P) bool     non-finite action or return
    /failed             (G, P) bool     evaluation raised (``--on-error skip``)
    /validation/...     individual (G, K), fitness (G, K), returns (G, K, V), steps (G, K),
                        seeds (G, V): the top K candidates re-evaluated on V fresh episodes
    /stats/<name>       (G,) float64    per-generation statistics (see STATS)
    /strategy/<name>    (G, ...)        the strategy's own per-generation figures and arrays
                                        (an ES's centre and step sizes, say; none for ga)
    /obs_norm/mean, std (G, obs_dim)    the observation normalisation each generation ran with
                                        (runs with ``obs_norm`` only)
    /selection/...      the final candidates re-evaluated on C fresh selection episodes (runs with
                        ``select_episodes``): genomes (C, n), generation (C,), chosen_on (C,) (the
                        fitness the strategy judged them by), fitness (C,), returns (C, S),
                        steps (C,), seeds (S,), chosen (1,) (-1 until the selection ran)
    /champion/...       genome (n,), fitness, generation, test_seeds (T,),
                        test_returns (T,), test_steps (T,), tested (1 once the run finished);
                        with T > 0 also test_outcomes (T,) int8 and test_action_cost (T,) float64,
                        each episode's outcome and action magnitude (:mod:`synapto.outcomes`; absent
                        from files written before them);
                        selection_fitness (1,) with selection; obs_mean, obs_std (obs_dim,) with
                        ``obs_norm`` (the normalisation the champion runs with)
    /timing/<name>      (G,) float64    wall-clock figures, the only non-reproducible data

Everything outside ``/timing`` is a pure function of the config, so two runs of
the same config are bit-identical there whatever the number of MPI ranks.

The datasets with a row per generation are the entries of one table,
:data:`synapto.store.evolve_rows.ROWS` (name, shape in the run's dimensions, dtype, which
runs have it): the layout, the rows a resume keeps and a generation's row
(:func:`~synapto.store.evolve_rows.record`, which the coordinator's loop hands to
:meth:`EvolveRunWriter.append`) are derived from it, so that a new dataset is one entry
there and one value where the loop builds the row.

The writer takes the run's config as an object with ``population``, ``episodes``,
``test_episodes``, ``validation_count``, ``validate_episodes``, ``select_episodes``,
``obs_norm`` and ``to_json()`` (:class:`synapto.evolution.config.EvolveConfig`), and the shapes
of the optional datasets in a :class:`~synapto.store.evolve_rows.Extras`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from synapto.common import faults
from synapto.common.errors import DiskFullError, RunFileError, UsageError, option_set, option_value
from synapto.store.checkpoint import checkpoint_path
from synapto.store.evolve_rows import PER_GENERATION, PER_GENERATION_GROUPS, STATS, Extras, per_generation
from synapto.store.files import (
    build_file,
    estimate_size,
    filling,
    fixed_dataset,
    layout_size,
    open_append,
    open_run,
    put_row,
    reserve_space,
    rows_dataset,
    writing,
)
from synapto.store.replace import replace_file, rewrite


class EvolveRunWriter:
    """Appends generations to an evolution run file (coordinator only)."""

    def __init__(self, f):
        self.f = f
        self._datasets: tuple = (None, {})  #: (the file, its per-generation datasets opened by name)

    @property
    def run_id(self) -> str:
        return str(self.f.attrs.get("run_id", ""))

    @property
    def compact(self) -> bool:
        """Generations are stored as samples (``/samples``) rather than populations."""
        return "samples" in self.f

    @property
    def capacity(self) -> int:
        """Generations this file has rows for (see :func:`grow`)."""
        return int(self.f["fitness"].shape[0])

    @staticmethod
    def layout(config, n_params: int, extras: Extras = Extras(), rows: int | None = None) -> tuple[list, list]:
        """The datasets of a run file: ``(name, rows, tail, dtype)`` per-generation ones (``rows``
        rows; None: :func:`first_rows`) and ``(name, data, checksum)`` fixed ones."""
        G = first_rows(config) if rows is None else rows
        T, S = config.test_episodes, config.select_episodes
        datasets = [(name, G, tail, dtype) for name, tail, dtype in per_generation(config, n_params, extras)]
        fixed: list[tuple[str, np.ndarray, bool]] = []
        if S:
            fixed += [
                ("selection/seeds", np.zeros(S, dtype=np.int64), True),
                ("selection/chosen", np.full(1, -1, dtype=np.int64), False),
            ]
        fixed += [
            ("champion/genome", np.zeros(n_params), True),
            ("champion/fitness", np.full(1, -np.inf), True),
            ("champion/generation", np.full(1, -1, dtype=np.int64), True),
            ("champion/test_seeds", np.zeros(T, dtype=np.int64), True),
            ("champion/test_returns", np.zeros(T), True),
            ("champion/test_steps", np.zeros(T, dtype=np.int64), True),
            ("champion/tested", np.zeros(1, dtype=np.int64), False),
        ]
        if T:
            fixed += [
                ("champion/test_outcomes", np.full(T, -1, dtype=np.int8), True),
                ("champion/test_action_cost", np.full(T, np.nan), True),
            ]
        if S:
            fixed.append(("champion/selection_fitness", np.full(1, np.nan), True))
        if config.obs_norm:
            fixed += [
                ("champion/obs_mean", np.zeros(extras.obs_dim), True),
                ("champion/obs_std", np.ones(extras.obs_dim), True),
            ]
        return datasets, fixed

    @classmethod
    def estimated_size(cls, config, n_params: int, extras: Extras = Extras(), rows: int | None = None) -> int:
        """An upper estimate of the run file's size in bytes (its metadata never changes after creation)."""
        return layout_size(*cls.layout(config, n_params, extras, rows))

    @classmethod
    def build(
        cls,
        path: Path,
        config,
        n_params: int,
        agent_name: str,
        extras: Extras = Extras(),
        run_id: str | None = None,
        rows: int | None = None,
    ):
        """Write a new run file at ``path`` (a temporary name: see :meth:`create`) and
        return it open; every dataset at its final size, ``/completed`` = 0.  Its disk
        space is reserved first, so a full disk is met before HDF5 writes."""
        attrs = {
            "n_params": n_params,
            "agent_name": agent_name,
            **extras.attrs,
            **({"samples": extras.samples} if extras.samples else {}),
        }
        S = config.select_episodes
        between = (lambda f: _selection(f, 0, n_params, S)) if S else None
        layout = cls.layout(config, n_params, extras, rows)
        return build_file(path, "evolve", config.to_json(), attrs, layout, run_id=run_id, between=between)

    @classmethod
    def create(
        cls, path: Path, config, n_params: int, agent_name: str, extras: Extras = Extras(), overwrite: bool = True
    ) -> EvolveRunWriter:
        """Create the run file ``path`` (built beside it, fsync-ed, renamed into place: whole or
        not at all) and open it for appending.  An existing file is refused unless
        ``overwrite``; the checkpoint of a run it replaces is removed first."""
        path = Path(path)
        if path.exists() and not overwrite:
            raise UsageError(f"{option_value('out', str(path))} exists; pass {option_set('force')} to overwrite it")
        ckpt = checkpoint_path(path)

        def build(tmp: Path) -> None:
            cls.build(tmp, config, n_params, agent_name, extras).close()
            for stale in (ckpt, ckpt.with_name(ckpt.name + ".tmp")):  # never beside a new run file
                stale.unlink(missing_ok=True)

        try:
            replace_file(path, build, ".new.tmp", "creating the run file")
        except DiskFullError as exc:
            exc.resumable = False  # nothing of this run is on disk
            raise
        return cls(open_append(path))

    def append(self, g: int, row: Mapping[str, np.ndarray]) -> None:
        """Write generation ``g`` (must equal /completed), flush, then advance the counter.

        ``row`` maps the per-generation datasets to generation ``g``'s row
        (:func:`~synapto.store.evolve_rows.record`)."""
        f = self.f
        done = int(f["completed"][0])
        if g != done:
            raise RuntimeError(f"appending generation {g} to a file with {done} completed")

        if self._datasets[0] is not f:  # a reopened file (the final selection) opens its own
            self._datasets = (f, {})
        for k, (name, value) in enumerate(row.items()):
            put_row(f, name, g, value, self._datasets[1])
            if k == len(row) // 2:
                faults.point("rows", g)  # half the rows written (some still in HDF5's cache)
        f.flush()
        faults.point("runfile", g)
        f["completed"][0] = g + 1
        f.flush()

    def obs_norms(self, generations: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The observation normalisation of the first ``generations`` generations."""
        mean, std = self.f["obs_norm/mean"][:generations], self.f["obs_norm/std"][:generations]
        return [(m, s) for m, s in zip(mean, std)]

    def figures(self, generation: int) -> tuple[dict[str, float], dict[str, float], float]:
        """Generation ``generation``'s ``/stats`` and ``/timing`` rows by name, and the run's
        wall time up to it: what its tracking rows hold, written again on resume."""
        stats, timing = self.f["stats"], self.f["timing"]
        order = [*(k for k in STATS if k in stats), *sorted(set(stats) - set(STATS))]
        own = self.f.get("strategy", {})  # the strategy's figures (not its arrays)
        return (
            {
                **{k: float(stats[k][generation]) for k in order},
                **{k: float(own[k][generation]) for k in own if own[k].ndim == 1},
            },
            {k: float(timing[k][generation]) for k in timing},
            float(np.sum(timing["wall"][: generation + 1])),
        )

    def steps_of(self, generation: int) -> np.ndarray:
        """``/steps`` of one written generation (each individual's training env steps)."""
        return np.asarray(self.f["steps"][generation])

    def write_selection(self, selection) -> None:
        """The final candidates' re-evaluation (a :class:`synapto.evolution.champion.Selection`).

        Their number is known only now, so the file is rebuilt once: copied beside itself
        with the selection added, fsync-ed and renamed over itself (a crash leaves the old
        file or the new one), then reopened."""
        path = Path(self.f.filename)
        C = len(selection.candidates)
        values = {
            "genomes": [c.genome for c in selection.candidates],
            "generation": [c.generation for c in selection.candidates],
            "chosen_on": [c.fitness for c in selection.candidates],
            "fitness": selection.fitness,
            "returns": selection.returns,
            "steps": selection.steps,
        }
        n_params, S = self.f["champion/genome"].shape[0], self.f["selection/seeds"].shape[0]
        self.f.flush()
        self.f.close()

        def build(tmp: Path) -> None:
            shutil.copyfile(path, tmp)
            extra = estimate_size([(C, (n_params,), "f8"), (C, (S,), "f8"), *[(C, (), "f8")] * 4], [])
            reserve_space(tmp, os.path.getsize(tmp) + extra)  # room for what is added: see files.create_file
            with filling(open_append(tmp), tmp) as f:
                for name in values:
                    del f[f"selection/{name}"]
                _selection(f, C, n_params, S, values)
                f["selection/seeds"][:] = selection.seeds
                f["selection/chosen"][0] = selection.chosen
                f["champion/selection_fitness"][0] = selection.fitness[selection.chosen]
                f.flush()

        try:
            replace_file(path, build, ".selection.tmp", "writing the final selection")
        finally:
            self.f = open_append(path)

    def write_champion(
        self, genome, fitness, generation, seeds, returns, steps, norm=None, outcomes=None, action_cost=None
    ) -> None:
        """The champion and its test episodes (``outcomes``, ``action_cost``: see
        :mod:`synapto.outcomes`), then ``/champion/tested``."""
        c = self.f["champion"]
        if outcomes is not None and "test_outcomes" in c:
            c["test_outcomes"][:] = outcomes
            c["test_action_cost"][:] = action_cost
        if norm is not None:
            c["obs_mean"][:], c["obs_std"][:] = norm
        c["genome"][:] = genome
        c["fitness"][0] = fitness
        c["generation"][0] = generation
        c["test_seeds"][:] = seeds
        c["test_returns"][:] = returns
        c["test_steps"][:] = steps
        self.f.flush()

        faults.point("champion", int(self.f["completed"][0]))
        c["tested"][0] = 1  # the run's last step is done
        self.f.flush()

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()


def _selection(f, C: int, n_params: int, S: int, values: Mapping | None = None) -> None:
    """The selection datasets of ``C`` candidates (``values``: their contents; else fill)."""
    shapes = {
        "genomes": ((n_params,), "f8"),
        "generation": ((), "i8"),
        "chosen_on": ((), "f8"),
        "fitness": ((), "f8"),
        "returns": ((S,), "f8"),
        "steps": ((), "i8"),
    }
    for name, (tail, dtype) in shapes.items():
        if values is None:
            rows_dataset(f, f"selection/{name}", C, tail, dtype)
        else:
            data = np.asarray(values[name], dtype=dtype).reshape((C, *tail))
            fixed_dataset(f, f"selection/{name}", data)


# --------------------------------------------------------------------------- capacity
#: generations a new run file has rows for; a run that goes past them doubles them
#: (:func:`grow`), so a file's size follows the generations run, not ``--generations``
FIRST_ROWS = 128


def rows_for(config, generations: int) -> int:
    """The rows of a run file holding ``generations`` generations: :data:`FIRST_ROWS`,
    doubled until they hold them, at most ``config.generations`` -- a function of the
    config and the generations alone, so an interrupted and resumed run file equals an
    uninterrupted one."""
    rows = FIRST_ROWS
    while rows < generations:
        rows *= 2
    return max(1, min(config.generations, rows))


def first_rows(config) -> int:
    return rows_for(config, 0)


def grow(
    writer: EvolveRunWriter, path: Path, config, n_params: int, agent_name: str, extras: Extras = Extras()
) -> EvolveRunWriter:
    """The run file rewritten with twice its rows (at most ``config.generations``; the rows
    written so far kept), like the rebuild of ``--resume``: a new file beside the old one,
    renamed over it, so that no file's metadata ever changes after its creation."""
    done = int(writer.f["completed"][0])
    rows = max(writer.capacity + 1, rows_for(config, writer.capacity + 1))
    writer.close()
    return rebuild_prefix(path, done, config, n_params, agent_name, extras, rows=rows, what="growing it")


# --------------------------------------------------------------------------- resume
def rebuild_prefix(
    path: Path,
    generations: int,
    config,
    n_params: int,
    agent_name: str,
    extras: Extras = Extras(),
    run_id: str | None = None,
    rows: int | None = None,
    what: str = "rebuilding it to resume",
) -> EvolveRunWriter:
    """Replace ``path`` by a fresh run file holding its first ``generations`` rows.

    Rows of a generation that did not finish (and of any generation after the last
    checkpoint) are dropped.  It has ``rows`` rows (None: :func:`rows_for`).  The new file is written beside the
    old one and ``os.replace``-d over it (:func:`synapto.store.files.rewrite`), so a crash here
    leaves the old file in place.  It keeps the run's id and creation time; a file of a
    format before ids takes ``run_id`` (its checkpoint's), or stays without one.
    """
    path = Path(path)
    with open_run(path, kind="evolve") as old:
        done = int(old["completed"][0])
        if done < generations:
            raise RunFileError(f"{str(path)!r} holds {done} generations, fewer than its checkpoint's {generations}")
        names = [*PER_GENERATION, *(f"{g}/{k}" for g in PER_GENERATION_GROUPS if g in old for k in old[g])]
        try:
            data = {name: old[name][:generations] for name in names if name in old}
        except Exception as exc:
            raise RunFileError(f"{str(path)!r} is corrupted ({str(exc).splitlines()[0]})") from None
        if "population" in old:  # a file of populations stays one (its generations have no noise keys)
            extras = replace(extras, samples="", sample_shapes={})
        run_id = str(old.attrs.get("run_id", "")) or run_id or ""
        capacity = rows if rows is not None else rows_for(config, generations)
        created = old.attrs.get("created", "")

    def write(tmp: Path) -> None:
        f = EvolveRunWriter.build(tmp, config, n_params, agent_name, extras, run_id=run_id, rows=capacity)
        with filling(f, tmp):
            if created:
                f.attrs["created"] = created
            for name, values in data.items():
                if name in f and len(values) and f[name].size:
                    f[name][:generations] = values
            f.flush()
            f["completed"][0] = generations
            f.flush()

        faults.point("rebuild", generations)  # the new file is whole, the old one still in place

    with writing(path, what):
        return EvolveRunWriter(rewrite(path, write, what))
