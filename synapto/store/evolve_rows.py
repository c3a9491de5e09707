"""The evolution run file's rows: the table of its datasets with one row per generation.

:data:`ROWS` lists them (name, shape in the run's dimensions, dtype, which runs have it),
in the order a run file holds them; the layout of :class:`synapto.store.evolve.EvolveRunWriter`
(:func:`per_generation`, with the shapes of a run's optional datasets in :class:`Extras`),
the rows a resume keeps (:data:`PER_GENERATION`, :data:`PER_GENERATION_GROUPS`) and one
generation's row (:func:`record`, which the coordinator's loop hands to
:meth:`~synapto.store.evolve.EvolveRunWriter.append`) are derived from it, so that a new
dataset is one entry there and one value where the loop builds the row.  :data:`STATS` and
:data:`TIMING` name the ``/stats`` and ``/timing`` figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# fmt: off
# tables: a name list per line of related figures, as the run file's layout reads
STATS = (
    "generation", "env_steps", "best_fitness", "best_ever_fitness",
    "pop_mean", "pop_std", "pop_min", "pop_max",
    "elite_mean", "elite_std", "elite_min", "elite_max",
    "connections_mean", "connections_std", "champion_connections", "prune_rate",
    "nonfinite_count", "failure_count", "validation_best", "validation_mean", "validation_env_steps",
)
TIMING = ("wall", "eval_wall", "worker_compute", "worker_env", "worker_agent", "worker_idle", "validation",
          "update", "write")
# fmt: on
#: ``/samples/<name>``'s dtype where it is not float64 (noise keys; a GA lineage's, see
#: :mod:`synapto.lineage`)
SAMPLE_DTYPES = {"keys": "u8", "pruned": "u1", "refs": "i8", "origin": "i8"}


@dataclass(frozen=True)
class Row:
    """One dataset of the run file with a row per generation (an entry of :data:`ROWS`)."""

    #: the dataset; ``<group>/*``: the group's datasets, named and shaped by the run (:class:`Extras`)
    name: str
    #: the shape of one generation's row, in the run's dimensions: P population, E episodes,
    #: K validated candidates, V validation episodes, n genome length, O observation size
    shape: tuple[str, ...] = ()
    dtype: str = "f8"
    #: which runs have it: "" every run, "populations" / "samples" by how the genomes are stored,
    #: "obs_norm" runs with ``obs_norm``
    when: str = ""


#: every dataset with one row per generation, in the order a run file holds them: the layout
#: (:meth:`EvolveRunWriter.layout`), the rows kept on resume (:func:`rebuild_prefix`) and a
#: generation's row (:func:`record`) are derived from it
# fmt: off
# a table: one line per group of related datasets
ROWS = (
    Row("fitness", ("P",)), Row("returns", ("P", "E")), Row("steps", ("P",), "i8"), Row("seeds", ("P", "E"), "i8"),
    Row("population", ("P", "n"), when="populations"), Row("samples/*", when="samples"),
    Row("connections", ("P",), "i8"), Row("nonfinite", ("P",), "?"), Row("failed", ("P",), "?"),
    Row("validation/individual", ("K",), "i8"), Row("validation/fitness", ("K",)),
    Row("validation/returns", ("K", "V")), Row("validation/steps", ("K",), "i8"),
    Row("validation/seeds", ("V",), "i8"),
    *(Row(f"stats/{name}") for name in STATS), *(Row(f"timing/{name}") for name in TIMING),
    Row("strategy/*"),
    Row("obs_norm/mean", ("O",), when="obs_norm"), Row("obs_norm/std", ("O",), when="obs_norm"),
)
# fmt: on
#: the per-generation datasets of fixed names
PER_GENERATION = tuple(row.name for row in ROWS if not row.name.endswith("/*"))
#: groups whose datasets (named by the run) hold one row per generation
PER_GENERATION_GROUPS = tuple(row.name[:-2] for row in ROWS if row.name.endswith("/*"))


def strategy_figures(figures: Mapping[str, float]) -> dict[str, float]:
    """Those of a strategy's per-generation figures that are its own (``/strategy/<name>``),
    not one of the common :data:`STATS`."""
    return {k: v for k, v in figures.items() if k not in STATS}


def record(
    values: Mapping[str, Any],
    stats: Mapping[str, float],
    timing: Mapping[str, float],
    *,
    samples: Mapping[str, np.ndarray] | None = None,
    norm=None,
    arrays: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """One generation's row of the run file, by dataset name in the order of :data:`ROWS`:

    - ``values``: the datasets of fixed names but ``/stats``, ``/timing`` and ``/obs_norm``
      (``fitness`` ... ``validation/seeds``; ``population`` where ``samples`` is None);
    - ``samples``: the genomes as samples (``/samples/<name>``) rather than ``population``;
    - ``stats``: every :data:`STATS` figure, and the strategy's own (``/strategy/<name>``);
    - ``timing``: the ``/timing`` figures (NaN where missing);
    - ``arrays``: the strategy's arrays (``/strategy/<name>``);
    - ``norm``: the ``(mean, std)`` observation normalisation the generation ran with.
    """
    unknown = sorted(set(values) - set(PER_GENERATION))
    if unknown:
        raise RuntimeError(f"a generation's row has no dataset(s) {', '.join(unknown)}")
    given = {
        **values,
        **{f"stats/{k}": stats[k] for k in STATS},
        **{f"timing/{k}": timing.get(k, np.nan) for k in TIMING},
        **({"obs_norm/mean": norm[0], "obs_norm/std": norm[1]} if norm is not None else {}),
    }
    groups: dict[str, dict[str, Any]] = {
        "samples": {f"samples/{k}": a for k, a in (samples or {}).items()},
        "strategy": {
            **{f"strategy/{k}": x for k, x in strategy_figures(stats).items()},
            **{f"strategy/{k}": a for k, a in (arrays or {}).items()},
        },
    }
    row: dict[str, Any] = {}
    for r in ROWS:
        if r.name.endswith("/*"):
            row.update(groups[r.name[:-2]])
        elif r.name in given:
            row[r.name] = given[r.name]
        elif not r.when or (r.when == "populations" and samples is None):
            raise RuntimeError(f"a generation's row lacks {r.name}")
    return row


@dataclass(frozen=True)
class Extras:
    """Shapes of a run's optional datasets."""

    obs_dim: int = 0  #: observation size (the obs_norm datasets; 0: none)
    #: ``/strategy/<name>``: the shape of one generation's row (``()`` for a figure)
    strategy: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: the kind of :class:`synapto.common.noise.Samples` the generations are stored as ("": populations)
    samples: str = ""
    #: ``/samples/<name>``: the shape of one generation's row (``keys`` is uint64, the rest float64)
    sample_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: text attributes of ``/`` besides the layout's (``action_range``: what the agent's actions span)
    attrs: Mapping[str, str] = field(default_factory=dict)


def per_generation(config, n_params: int, extras: Extras) -> list[tuple[str, tuple[int, ...], str]]:
    """``(name, shape of a row, dtype)`` of every per-generation dataset of a run (:data:`ROWS`)."""
    dims = {
        "P": config.population,
        "E": config.episodes,
        "K": config.validation_count,
        "V": config.validate_episodes,
        "n": n_params,
        "O": extras.obs_dim,
    }
    present = {
        "": True,
        "populations": not extras.samples,
        "samples": bool(extras.samples),
        "obs_norm": bool(config.obs_norm),
    }
    groups = {"samples": extras.sample_shapes, "strategy": extras.strategy}
    out = []
    for row in ROWS:
        if not present[row.when]:
            continue
        if row.name.endswith("/*"):
            group = row.name[:-2]
            dtypes = SAMPLE_DTYPES if group == "samples" else {}
            out += [(f"{group}/{k}", tuple(shape), dtypes.get(k, row.dtype)) for k, shape in groups[group].items()]
        else:
            out.append((row.name, tuple(dims[d] for d in row.shape), row.dtype))
    return out
