"""Lineages: a GA generation's genomes rebuilt from their parents and a few integers.

The GA (:mod:`synapto.evolution.strategies.ga`) makes each child from the pool of
parents (hall of fame, best-ever agent, the generation's top), by recombination swaps
of whole matrices, pruning and a Gaussian perturbation, all drawn from the run's one
Generator.  A :class:`Lineage` records, per child:

- ``origin``: for each *segment* of the genome (the pieces the agent's recombination
  groups cut it into, :func:`segments`), which parent it was copied from;
- ``pruned``: the weights the pruning zeroed (bits, ``np.packbits``), which get
  ``base * 0.0`` (the agent's ``genome * keep`` mask: a negative weight becomes -0.0) or
  ``+0.0`` under a connection budget (:func:`synapto.evolution.strategies.prune.prune_to`);
- ``keys``: the noise key (:mod:`synapto.common.noise`) of the Generator just before the
  child's perturbation, which :func:`perturb` redraws bit for bit.

The coordinator still runs the GA itself: the perturbations of one generation are one
stream of draws whose length depends on every child's surviving weights, so a child's
key is known only once the children before it were drawn.  What the lineage spares is
the rest: workers get the few distinct parents once per generation (as a map's
context) instead of every genome, and the run file stores parents as references
``(generation, row)`` to earlier rows, O(population) per generation; generation 0 is
stored as the keys of the agent's ``init_genome`` draws.  :func:`rebuild` follows the
references back, generation by generation, and refuses a lineage whose parent row the
file does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from synapto.agents import build_agent
from synapto.common.errors import RunFileError
from synapto.common.noise import KEY_WIDTH, generator_at
from synapto.envs import EnvOptions


def alive_indices(genome: np.ndarray) -> np.ndarray:
    """Indices of a genome's surviving (nonzero) weights, as ``np.flatnonzero`` gives them
    (NaN counts, -0.0 does not); through a comparison first, which is about 6x faster than
    ``nonzero`` on long float arrays."""
    return (genome != 0).nonzero()[0] if genome.size > 1024 else genome.nonzero()[0]


def perturb(genome: np.ndarray, std: float, rng: np.random.Generator, in_place: bool = False) -> np.ndarray:
    """Gaussian perturbation of the surviving weights; pruned ones stay exactly 0.  The sums
    are those of ``child[alive] += std * noise``, bit for bit, with one gather and one scatter."""
    alive = alive_indices(genome)
    noise = rng.standard_normal(alive.size)
    noise *= std
    noise += genome[alive]
    child = genome if in_place else genome.copy()
    child[alive] = noise
    return child


def segments(groups, n: int) -> np.ndarray | None:
    """Boundaries ``(S + 1,)`` of the pieces that recombination moves whole: every start
    and stop of the slices in ``groups``, with 0 and ``n``; None if a group holds
    something else than a contiguous slice (no lineage then)."""
    cuts = {0, n}
    for group in groups:
        for s in group:
            if not isinstance(s, slice) or s.step not in (None, 1):
                return None
            start, stop, _ = s.indices(n)
            cuts.update((start, stop))
    return np.array(sorted(cuts), dtype=np.int64)


def segment_range(bounds: np.ndarray, s: slice) -> slice:
    """The segments a contiguous slice ``s`` covers."""
    start, stop, _ = s.indices(int(bounds[-1]))
    return slice(int(np.searchsorted(bounds, start)), int(np.searchsorted(bounds, stop)))


def changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Bits, packed: the weights whose float64 bits differ (signed zeros count)."""
    return np.packbits(before.view(np.uint64) != after.view(np.uint64))


def no_key() -> np.ndarray:
    """The key of a child that is not perturbed (a PCG64 increment is never 0)."""
    return np.zeros(KEY_WIDTH, dtype=np.uint64)


@dataclass(frozen=True, eq=False)
class Lineage:
    """One GA generation's genomes as parents, segments, pruned bits and noise keys."""

    kind = "lineage"
    bounds: np.ndarray  #: (S + 1,) segment boundaries (:func:`segments`)
    refs: np.ndarray  #: (R, 2) int64 (generation, row) of each parent; (-1, -1) past the used ones
    origin: np.ndarray  #: (P, S) int64 the parent (row of ``refs``) of each segment; -1: generation 0
    pruned: np.ndarray  #: (P, ceil(n / 8)) uint8 packed bits of the weights pruning zeroed
    keys: np.ndarray  #: (P, KEY_WIDTH) uint64 the perturbation's key (generation 0: init_genome's)
    std: float  #: the perturbation's std (0: none)
    assign: bool  #: pruned weights are set to +0.0 (a connection budget), else ``base * 0.0``
    parents: np.ndarray | None = None  #: (U, n) the used parents' genomes (over the wire)
    initial: np.ndarray | None = None  #: (P, n) generation 0's genomes (over the wire)

    @property
    def population(self) -> int:
        return len(self.origin)

    @property
    def n(self) -> int:
        return int(self.bounds[-1])

    def genome(self, i: int, parents=None, agent=None) -> np.ndarray:
        """Genome ``i`` from ``parents`` (default: :attr:`parents`); generation 0's from
        :attr:`initial` or, with the ``agent``, its ``init_genome`` redrawn from the key."""
        if not 0 <= i < self.population:
            raise IndexError(f"individual {i} of a population of {self.population}")
        if self.origin[i, 0] < 0:
            if self.initial is not None:
                return self.initial[i]
            return agent.init_genome(generator_at(self.keys[i]))
        parents = self.parents if parents is None else parents
        b = self.bounds
        base = np.empty(self.n)
        for s, u in enumerate(self.origin[i]):
            base[b[s] : b[s + 1]] = parents[u][b[s] : b[s + 1]]
        mask = np.unpackbits(self.pruned[i], count=self.n).astype(bool)
        if mask.any():
            base[mask] = 0.0 if self.assign else base[mask] * 0.0
        if self.std > 0 and self.keys[i, 2:4].any():
            return perturb(base, self.std, generator_at(self.keys[i]), in_place=True)
        return base

    def genomes(self) -> np.ndarray:
        return np.stack([self.genome(i) for i in range(self.population)])

    def arrays(self) -> dict[str, np.ndarray | np.float64]:
        """What the run file stores of a generation (``/samples/<name>``)."""
        return {
            "refs": self.refs,
            "origin": self.origin,
            "pruned": self.pruned,
            "keys": self.keys,
            "std": np.float64(self.std),
            "assign": np.float64(self.assign),
        }

    def state(self) -> dict[str, np.ndarray | np.float64]:
        """Everything, for the checkpoint (``lineage_<name>``)."""
        out = {**self.arrays(), "bounds": self.bounds}
        out.update({k: v for k, v in (("parents", self.parents), ("initial", self.initial)) if v is not None})
        return out

    @classmethod
    def from_arrays(cls, bounds, arrays: Mapping[str, Any]) -> Lineage:
        opt = [None if arrays.get(k) is None else np.asarray(arrays[k], np.float64) for k in ("parents", "initial")]
        return cls(
            np.asarray(bounds, np.int64),
            np.asarray(arrays["refs"], np.int64),
            np.asarray(arrays["origin"], np.int64),
            np.asarray(arrays["pruned"], np.uint8),
            np.asarray(arrays["keys"], np.uint64),
            float(arrays["std"]),
            bool(arrays["assign"]),
            *opt,
        )


#: the datasets of ``/samples`` in a GA lineage file, one row per generation
LINEAGE_ARRAYS = ("refs", "origin", "pruned", "keys", "std", "assign")


def read_lineage(f, generation: int, where: str) -> Lineage:
    """Generation ``generation``'s :class:`Lineage` of the open run file ``f`` (h5py), refused
    (:class:`RunFileError` "``where`` is corrupted: ...") where the file could not have been
    written so: a missing dataset or attribute, segment bounds that do not cut the genome
    (``n_params``), rows of the wrong shape, an origin outside the references (or -1, a
    fresh draw, after generation 0), a std that is not a finite number >= 0.  Content that
    is possible (keys, pruned bits) cannot be told from the file; replay finds it out."""

    def bad(why: str) -> RunFileError:
        return RunFileError(f"{where} is corrupted: generation {generation}'s lineage {why} (a damaged lineage)")

    missing = [k for k in LINEAGE_ARRAYS if k not in f["samples"]]
    if missing:
        raise bad(f"has no /samples/{', /samples/'.join(missing)}")
    n = int(f.attrs.get("n_params", -1))
    bounds = _bounds(f.attrs.get("lineage_bounds"), n)
    if bounds is None:
        raise bad(f"has segment bounds {f.attrs.get('lineage_bounds')!r}, not integers rising from 0 to {n}")
    try:
        lin = Lineage.from_arrays(bounds, {k: f["samples"][k][generation] for k in LINEAGE_ARRAYS})
    except (ValueError, TypeError, OverflowError) as exc:
        raise bad(f"does not read ({exc})") from None
    why = _impossible(lin, generation, int(f["fitness"].shape[1]), n)
    if why:
        raise bad(why)
    return lin


def _bounds(text, n: int) -> np.ndarray | None:
    """``lineage_bounds`` (JSON) as segment bounds, or None unless integers rising strictly from 0 to ``n``."""
    try:
        values = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    b = np.array(values, dtype=np.int64)
    if len(b) < 2 or b[0] != 0 or b[-1] != n or np.any(np.diff(b) <= 0):
        return None
    return b


def _impossible(lin: Lineage, generation: int, population: int, n: int) -> str | None:
    """Why ``lin`` (generation ``generation`` of a file of ``population`` and ``n`` weights)
    cannot be a lineage the GA wrote, or None."""
    S, R = len(lin.bounds) - 1, len(lin.refs)
    shapes = {
        "refs": (lin.refs.shape, (R, 2)),
        "origin": (lin.origin.shape, (population, S)),
        "pruned": (lin.pruned.shape, (population, -(-n // 8))),
        "keys": (lin.keys.shape, (population, KEY_WIDTH)),
    }
    for name, (got, want) in shapes.items():
        if got != want:
            return f"has /samples/{name} of shape {got}, not {want}"
    if generation == 0 and np.any(lin.origin != -1):
        return "has parents in generation 0 (origin must be -1: a fresh draw)"
    if generation > 0 and not np.all((lin.origin >= 0) & (lin.origin < R)):
        bad = lin.origin[(lin.origin < 0) | (lin.origin >= R)]
        return f"has origin {int(bad[0])}: not a parent of its {R} references"
    if not (np.isfinite(lin.std) and lin.std >= 0):
        return f"has std {lin.std!r}: not a finite number >= 0"
    return None


def rebuild(generation_of, wanted: list[tuple[int, int]], agent_of, where: str) -> dict:
    """Genomes ``{(generation, row): genome}`` of ``wanted`` and of every ancestor they need.

    ``generation_of(g)``: the file's :class:`Lineage` of generation ``g`` (None past the
    completed ones); ``agent_of()``: the agent, for generation 0's ``init_genome``.  Walks
    the references back, then builds forward, oldest generation first; a reference to a
    row the file does not hold (a later or missing generation, a row out of range, an
    unused parent) is a :class:`RunFileError` naming ``where``."""
    lineages: dict[int, Lineage] = {}
    need: dict[int, set] = {}
    todo = list(wanted)
    while todo:
        g, r = todo.pop()
        if r in need.setdefault(g, set()):
            continue
        lin = lineages.get(g) or generation_of(g)
        if lin is None or not 0 <= r < lin.population:
            raise RunFileError(f"{where}: a lineage refers to generation {g} row {r}, which the file does not hold")
        lineages[g] = lin
        need[g].add(r)
        for u in np.unique(lin.origin[r]):
            if u < 0:
                continue
            pg, pr = (int(x) for x in lin.refs[u]) if u < len(lin.refs) else (-1, -1)
            if not 0 <= pg < g:
                raise RunFileError(
                    f"{where}: generation {g} row {r} has parent {u} at generation {pg} row {pr}, "
                    f"which the file does not hold (a damaged lineage)"
                )
            todo.append((pg, pr))
    out: dict = {}
    agent = None
    for g in sorted(need):
        lin = lineages[g]
        for r in sorted(need[g]):
            if lin.origin[r, 0] < 0 and agent is None:
                agent = agent_of()
            parents = {int(u): out[tuple(int(x) for x in lin.refs[u])] for u in np.unique(lin.origin[r]) if u >= 0}
            out[g, r] = lin.genome(r, parents, agent)
    return out


def agent_of(config: dict):
    """The agent of a run file's stored ``config`` (its env, agent, hidden sizes, agent and
    env options): what generation 0's ``init_genome`` needs, built where a file is read."""
    return build_agent(
        SimpleNamespace(
            env=config["env"],
            agent=config["agent"],
            hidden=tuple(config.get("hidden") or ()),
            agent_options=dict(config.get("agent_options") or {}),
            make_kwargs=EnvOptions.parse(config.get("env_options")).make_kwargs(),
        )
    )
