"""The evolution run file: written by the coordinator only.

The file is created with every dataset in place (the per-generation ones empty and
resizable along the generation axis), then switched to HDF5's single-writer/multiple-
reader (SWMR) mode, in which the library orders its metadata flushes so that the file
on disk is always a valid HDF5 file -- also when the writer is killed mid-write -- and
can be read while it grows.  After each generation its rows are written and flushed,
and only then is the counter ``/completed`` advanced and flushed.  Readers trust
``/completed``, never the datasets' lengths: rows past it belong to a generation that
did not finish.

Layout (G generations, P individuals, E episodes, n genome length, T test episodes)::

    /                   attrs: format="synapto-run", format_version, kind="evolve",
                        config (JSON), versions (JSON), created (ISO time), n_params, agent_name
    /completed          (1,)  int64   generations fully written
    /fitness            (G, P) float64  fitness (mean return - penalty; -inf if non-finite)
    /returns            (G, P, E) float64  return of each episode
    /steps              (G, P) int64    env steps of each evaluation
    /seeds              (G, P, E) int64  env.reset seeds of each episode
    /population         (G, P, n) float64  the genomes evaluated (0 = pruned)
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
                        selection_fitness (1,) with selection; obs_mean, obs_std (obs_dim,) with
                        ``obs_norm`` (the normalisation the champion runs with)
    /timing/<name>      (G,) float64    wall-clock figures, the only non-reproducible data

Everything outside ``/timing`` is a pure function of the config, so two runs of
the same config are bit-identical there whatever the number of MPI ranks.

The writer takes the run's config as an object with ``population``, ``episodes``,
``test_episodes``, ``validation_count``, ``validate_episodes``, ``select_episodes``,
``obs_norm`` and ``to_json()`` (:class:`synapto.config.EvolveConfig`), and the shapes
of the optional datasets in a :class:`Extras`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from synapto.errors import RunFileError
from synapto.store.files import new_file, open_run, put_row, rewrite

STATS = (
    "generation", "env_steps", "best_fitness", "best_ever_fitness",
    "pop_mean", "pop_std", "pop_min", "pop_max",
    "elite_mean", "elite_std", "elite_min", "elite_max",
    "connections_mean", "connections_std", "champion_connections", "prune_rate",
    "nonfinite_count", "failure_count", "validation_best", "validation_mean", "validation_env_steps",
)
TIMING = ("wall", "eval_wall", "worker_compute", "worker_env", "worker_agent", "worker_idle", "validation",
          "update", "write")
#: every dataset with one row per generation
PER_GENERATION = ("fitness", "returns", "steps", "seeds", "population", "connections", "nonfinite", "failed",
                  "validation/individual", "validation/fitness", "validation/returns", "validation/steps",
                  "validation/seeds",
                  *(f"stats/{n}" for n in STATS), *(f"timing/{n}" for n in TIMING))


#: groups whose datasets hold one row per generation, besides PER_GENERATION
PER_GENERATION_GROUPS = ("strategy", "obs_norm")


@dataclass(frozen=True)
class Extras:
    """Shapes of a run's optional datasets."""

    obs_dim: int = 0  #: observation size (the obs_norm datasets; 0: none)
    #: ``/strategy/<name>``: the shape of one generation's row (``()`` for a figure)
    strategy: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


def _growing(f, name, tail_shape, dtype, compression=None):
    # An empty trailing dimension (no validation, say) still needs a non-empty chunk.
    maxshape = (None, *(None if d == 0 else d for d in tail_shape))
    chunks = (1, *(max(d, 1) for d in tail_shape)) if tail_shape else (64,)
    return f.create_dataset(name, shape=(0, *tail_shape), maxshape=maxshape, chunks=chunks, dtype=dtype,
                            compression=compression)


class EvolveRunWriter:
    """Appends generations to an evolution run file (coordinator only)."""

    def __init__(self, f):
        self.f = f

    @classmethod
    def create(cls, path: Path, config, n_params: int, agent_name: str,
               extras: Extras = Extras()) -> "EvolveRunWriter":
        P, E, T = config.population, config.episodes, config.test_episodes
        f = new_file(path, "evolve", config.to_json(), {"n_params": n_params, "agent_name": agent_name})
        _growing(f, "fitness", (P,), "f8")
        _growing(f, "returns", (P, E), "f8")
        _growing(f, "steps", (P,), "i8")
        _growing(f, "seeds", (P, E), "i8")
        _growing(f, "population", (P, n_params), "f8", compression="lzf")
        _growing(f, "connections", (P,), "i8")
        _growing(f, "nonfinite", (P,), "?")
        _growing(f, "failed", (P,), "?")
        K, V = config.validation_count, config.validate_episodes
        _growing(f, "validation/individual", (K,), "i8")
        _growing(f, "validation/fitness", (K,), "f8")
        _growing(f, "validation/returns", (K, V), "f8")
        _growing(f, "validation/steps", (K,), "i8")
        _growing(f, "validation/seeds", (V,), "i8")
        for name in STATS:
            _growing(f, f"stats/{name}", (), "f8")
        for name in TIMING:
            _growing(f, f"timing/{name}", (), "f8")
        for name, shape in extras.strategy.items():
            _growing(f, f"strategy/{name}", tuple(shape), "f8")
        if config.obs_norm:
            _growing(f, "obs_norm/mean", (extras.obs_dim,), "f8")
            _growing(f, "obs_norm/std", (extras.obs_dim,), "f8")
        S = config.select_episodes
        if S:
            _growing(f, "selection/genomes", (n_params,), "f8")
            _growing(f, "selection/generation", (), "i8")
            _growing(f, "selection/chosen_on", (), "f8")
            _growing(f, "selection/fitness", (), "f8")
            _growing(f, "selection/returns", (S,), "f8")
            _growing(f, "selection/steps", (), "i8")
            f.create_dataset("selection/seeds", data=np.zeros(S, dtype=np.int64))
            f.create_dataset("selection/chosen", data=np.full(1, -1, dtype=np.int64))
        c = f.create_group("champion")
        c.create_dataset("genome", data=np.zeros(n_params))
        c.create_dataset("fitness", data=np.full(1, -np.inf))
        c.create_dataset("generation", data=np.full(1, -1, dtype=np.int64))
        c.create_dataset("test_seeds", data=np.zeros(T, dtype=np.int64))
        c.create_dataset("test_returns", data=np.zeros(T))
        c.create_dataset("test_steps", data=np.zeros(T, dtype=np.int64))
        c.create_dataset("tested", data=np.zeros(1, dtype=np.int64))
        if S:
            c.create_dataset("selection_fitness", data=np.full(1, np.nan))
        if config.obs_norm:
            c.create_dataset("obs_mean", data=np.zeros(extras.obs_dim))
            c.create_dataset("obs_std", data=np.ones(extras.obs_dim))
        f.flush()
        f.swmr_mode = True
        return cls(f)

    def append(self, g: int, data: Mapping[str, np.ndarray], stats: Mapping[str, float],
               timing: Mapping[str, float]) -> None:
        """Write generation ``g`` (must equal /completed), flush, then advance the counter.

        ``data`` maps the per-generation datasets (``fitness``, ``validation/seeds``, ...)
        to generation ``g``'s row."""
        f = self.f
        done = int(f["completed"][0])
        if g != done:
            raise RuntimeError(f"appending generation {g} to a file with {done} completed")
        for name, value in data.items():
            put_row(f, name, g, value)
        for name in STATS:
            put_row(f, f"stats/{name}", g, stats[name])
        for name in TIMING:
            put_row(f, f"timing/{name}", g, timing.get(name, np.nan))
        f.flush()
        from synapto import faults

        faults.point("runfile", g)
        f["completed"][0] = g + 1
        f.flush()

    def obs_norms(self, generations: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The observation normalisation of the first ``generations`` generations."""
        mean, std = self.f["obs_norm/mean"][:generations], self.f["obs_norm/std"][:generations]
        return [(m, s) for m, s in zip(mean, std)]

    def write_selection(self, selection) -> None:
        """The final candidates' re-evaluation (a :class:`synapto.evolution.champion.Selection`)."""
        f = self.f
        C = len(selection.candidates)
        for name, values in (("genomes", [c.genome for c in selection.candidates]),
                             ("generation", [c.generation for c in selection.candidates]),
                             ("chosen_on", [c.fitness for c in selection.candidates]),
                             ("fitness", selection.fitness), ("returns", selection.returns),
                             ("steps", selection.steps)):
            ds = f[f"selection/{name}"]
            ds.resize(C, axis=0)
            ds[:] = np.asarray(values)
        f["selection/seeds"][:] = selection.seeds
        f.flush()
        f["selection/chosen"][0] = selection.chosen
        f["champion/selection_fitness"][0] = selection.fitness[selection.chosen]
        f.flush()

    def write_champion(self, genome, fitness, generation, seeds, returns, steps, norm=None) -> None:
        c = self.f["champion"]
        if norm is not None:
            c["obs_mean"][:], c["obs_std"][:] = norm
        c["genome"][:] = genome
        c["fitness"][0] = fitness
        c["generation"][0] = generation
        c["test_seeds"][:] = seeds
        c["test_returns"][:] = returns
        c["test_steps"][:] = steps
        self.f.flush()
        from synapto import faults

        faults.point("champion", int(self.f["completed"][0]))
        c["tested"][0] = 1  # the run's last step is done
        self.f.flush()

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()


# --------------------------------------------------------------------------- resume
def rebuild_prefix(path: Path, generations: int, config, n_params: int, agent_name: str,
                   extras: Extras = Extras()) -> EvolveRunWriter:
    """Replace ``path`` by a fresh run file holding its first ``generations`` rows.

    Rows of a generation that did not finish (and of any generation after the last
    checkpoint) are dropped.  The new file is written beside the old one and
    ``os.replace``-d over it (:func:`synapto.store.files.rewrite`), so a crash here
    leaves the old file in place.
    """
    path = Path(path)
    with open_run(path, kind="evolve") as old:
        if int(old["completed"][0]) < generations:
            raise RunFileError(f"{str(path)!r} holds {int(old['completed'][0])} generations, "
                               f"fewer than its checkpoint's {generations}")
        names = [*PER_GENERATION, *(f"{g}/{k}" for g in PER_GENERATION_GROUPS if g in old for k in old[g])]
        rows = {name: old[name][:generations] for name in names if name in old}

    def write(tmp: Path) -> None:
        writer = EvolveRunWriter.create(tmp, config, n_params, agent_name, extras)
        try:
            f = writer.f
            for name, data in rows.items():
                if len(data):
                    f[name].resize(generations, axis=0)
                    f[name][:] = data
            f.flush()
            f["completed"][0] = generations
            f.flush()
        finally:
            writer.close()
        from synapto import faults

        faults.point("rebuild", generations)  # the new file is whole, the old one still in place

    return EvolveRunWriter(rewrite(path, write))
