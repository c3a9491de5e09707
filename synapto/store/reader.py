"""Reading run files back: :class:`RunData`, the one reader of evolution and PPO runs.

Everything outside :mod:`synapto.store` reads run files through it (replay, resume,
the viz commands, export, the benchmarks).  Only completed rows are returned
(``/completed`` generations or epochs): rows past it belong to one that did not finish.
Data that fails its checksum (or any other HDF5 read error) is a one-line
:class:`~synapto.common.errors.RunFileError`, whichever method met it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synapto.common.errors import RunFileError
from synapto.common.noise import Samples
from synapto.lineage import agent_of, read_lineage, rebuild
from synapto.store.files import open_run
from synapto.store.ppo import PROGRESS_COLUMNS, STATS as PPO_STATS, read_checkpoint_slot, read_params


@dataclass
class Champion:
    """The champion of an evolution run and its test episodes (meaningful once ``tested``)."""

    genome: np.ndarray
    fitness: float
    generation: int
    test_seeds: np.ndarray
    test_returns: np.ndarray
    test_steps: np.ndarray
    tested: bool
    #: the observation normalisation ``(mean, std)`` the champion runs with (None without obs_norm)
    obs_norm: tuple[np.ndarray, np.ndarray] | None = None
    selection_fitness: float | None = None  #: its fitness on the selection episodes (None without)
    #: each test episode's outcome and action magnitude (:mod:`synapto.outcomes`; None in older files)
    test_outcomes: np.ndarray | None = None
    test_action_cost: np.ndarray | None = None


@dataclass
class SelectionData:
    """The final candidates re-evaluated on the selection episodes."""

    genomes: np.ndarray
    generation: np.ndarray
    chosen_on: np.ndarray
    fitness: np.ndarray
    returns: np.ndarray
    steps: np.ndarray
    seeds: np.ndarray
    chosen: int  #: -1 until the selection ran


class RunData:
    """A run file opened for reading and validated; a context manager.

    ``RunData(path)`` reads any run; ``kind="evolve"`` or ``"ppo"`` refuses the other
    kind (one-line :class:`RunFileError`).  A PPO run opened as such has its root
    attributes checked at once.
    """

    def __init__(self, path: str | Path, kind: str | None = None):
        self.path = Path(path)
        self._f = open_run(self.path, kind=kind)
        try:
            kind_attr = self._f.attrs.get("kind")
            self.kind = kind_attr.decode() if isinstance(kind_attr, bytes) else str(kind_attr)
            self.completed = int(self._f["completed"][0])  #: generations (epochs) fully written
            if kind == "ppo":
                self._check_ppo()
        except BaseException:
            self._f.close()
            raise

    def _check_ppo(self) -> None:
        try:
            json.loads(self._f.attrs["config"])
            for name in ("ranks", "obs_dim", "act_dim", "discrete"):
                int(self._f.attrs[name])
        except Exception as exc:
            raise RunFileError(f"{str(self.path)!r} is not a valid PPO run file ({exc})") from None

    def verify(self) -> None:
        """Read every completed row of every dataset and everything else the file holds, so that
        damaged data (checksums) is refused now, in one line, rather than found later."""
        rows = {int(self._f[n].shape[0]) for n in ("fitness", "stats/Epoch") if n in self._f}

        def visit(name, obj):
            if hasattr(obj, "shape") and hasattr(obj, "dtype"):
                if obj.shape and obj.shape[0] in rows:
                    obj[: self.completed]
                else:
                    obj[()]

        self._f.visititems(visit)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._f.id.valid:
            self._f.close()

    def _need(self, kind: str) -> None:
        if self.kind != kind:
            raise RunFileError(f"{str(self.path)!r} is a {self.kind!r} run, expected a {kind!r} run")

    # ------------------------------------------------------------------ config, columns
    @property
    def run_id(self) -> str:
        """The run's identity (shared with its checkpoint; "" for files from before it)."""
        value = self._f.attrs.get("run_id", "")
        return value.decode() if isinstance(value, bytes) else str(value)

    @property
    def config_json(self) -> str:
        """The run's configuration as stored (JSON), for the caller's ``from_json``."""
        if "config" not in self._f.attrs:
            raise RunFileError(f"{str(self.path)!r} has no config attribute")
        return self._f.attrs["config"]

    @property
    def config(self) -> dict:
        """The configuration as the file stores it (not re-parsed with today's defaults);
        ``{}`` for a file without one."""
        try:
            cfg = json.loads(self._f.attrs.get("config", "{}"))
        except (TypeError, ValueError):
            cfg = None
        if not isinstance(cfg, dict):
            raise RunFileError(f"{str(self.path)!r} has an unreadable config attribute")
        return cfg

    def parse_config(self, from_json):
        """``from_json(config_json)`` (e.g. ``PPOConfig.from_json``); one-line error if it fails."""
        try:
            return from_json(self.config_json)
        except RunFileError:
            raise
        except Exception as exc:
            what = "PPO" if self.kind == "ppo" else "evolution"
            raise RunFileError(f"{str(self.path)!r} is not a valid {what} run file ({exc})") from None

    @property
    def finished(self) -> bool:
        """An evolution run whose champion is tested; a PPO run with all its epochs."""
        if self.kind == "evolve":
            return self.tested
        return self.completed >= int(self.config.get("epochs", self.completed))

    def stats(self, name: str) -> np.ndarray:
        """The completed rows of ``/stats/<name>``."""
        if f"stats/{name}" not in self._f:
            raise RunFileError(f"{str(self.path)!r} has no /stats/{name}: not a complete synapto run file")
        return self._f[f"stats/{name}"][: self.completed]

    def timing(self, name: str) -> np.ndarray:
        """The completed rows of ``/timing/<name>``; NaN for a figure this file's writer did not record."""
        if f"timing/{name}" not in self._f:
            return np.full(self.completed, np.nan)
        return self._f[f"timing/{name}"][: self.completed]

    def stats_columns(self) -> dict[str, np.ndarray]:
        """Every ``/stats`` column (completed rows), by name in sorted order; a column
        shorter than ``completed`` is left out."""
        return self._columns("stats")

    def timing_columns(self) -> dict[str, np.ndarray]:
        """Every ``/timing`` column, as :meth:`stats_columns`."""
        return self._columns("timing")

    def _columns(self, group: str) -> dict[str, np.ndarray]:
        out = {}
        for name in sorted(self._f[group].keys()) if group in self._f else []:
            data = np.asarray(self._f[f"{group}/{name}"][: self.completed])
            if data.shape[0] == self.completed:
                out[name] = data
        return out

    # ------------------------------------------------------------------ evolution runs
    def _rows(self, name: str, generation, index):
        self._need("evolve")
        ds = self._f[name]
        if generation is None:
            return ds[: self.completed]
        return ds[generation] if index is None else ds[generation, index]

    @property
    def episodes(self) -> int:
        """Episodes per evaluation (E)."""
        self._need("evolve")
        return int(self._f["returns"].shape[2])

    def fitness(self, generation: int | None = None, individual: int | None = None):
        """``(G, P)`` fitness of the completed generations, a generation's row, or one value."""
        return self._rows("fitness", generation, individual)

    def returns(self, generation: int | None = None, individual: int | None = None):
        """``(G, P, E)`` episode returns, as :meth:`fitness`."""
        return self._rows("returns", generation, individual)

    def seeds(self, generation: int | None = None, individual: int | None = None):
        """``(G, P, E)`` env.reset seeds, as :meth:`fitness`."""
        return self._rows("seeds", generation, individual)

    def steps(self, generation: int | None = None, individual: int | None = None):
        """``(G, P)`` env steps of each evaluation, as :meth:`fitness`."""
        return self._rows("steps", generation, individual)

    def failed(self, generation: int | None = None, individual: int | None = None):
        """``(G, P)`` flags of evaluations that raised (``--on-error skip``), as :meth:`fitness`."""
        return self._rows("failed", generation, individual)

    def nonfinite(self, generation: int | None = None, individual: int | None = None):
        """``(G, P)`` non-finite flags, as :meth:`fitness`."""
        return self._rows("nonfinite", generation, individual)

    @property
    def compact(self) -> bool:
        """The generations are stored as samples (``/samples``: centre, step sizes, noise
        keys) rather than populations; :meth:`population` rebuilds them either way."""
        self._need("evolve")
        return "samples" in self._f

    def samples(self, generation: int):
        """Generation ``generation`` as a :class:`synapto.common.noise.Samples` (compact files only)."""
        if not self.compact:
            raise RunFileError(f"{str(self.path)!r} stores populations, not samples")
        generation = generation + self.completed if generation < 0 else generation
        if not 0 <= generation < self.completed:
            raise RunFileError(f"{str(self.path)!r} has no completed generation {generation}")
        g = self._f["samples"]
        kind = self._samples_kind()
        if kind == "lineage":
            return read_lineage(self._f, generation, repr(str(self.path)))
        row = {k: g[k][generation] for k in g}
        return Samples.from_arrays(kind, self._f["strategy/centre"][generation], row)

    def _samples_kind(self) -> str:
        """The root attribute ``samples``: how ``/samples`` stores the generations."""
        kind = self._f.attrs.get("samples")
        if kind is None:
            raise RunFileError(f"{str(self.path)!r} is corrupted: it has /samples but no 'samples' attribute")
        return kind.decode() if isinstance(kind, bytes) else str(kind)

    def population(self, generation: int | None = None, individual: int | None = None):
        """``(G, P, n)`` genomes: the population of a generation, or one genome (rebuilt
        from the noise keys or the GA's lineages in a compact file, bit for bit)."""
        if not self.compact:
            return self._rows("population", generation, individual)
        if self._samples_kind() == "lineage":
            return self._lineage_population(generation, individual)
        if generation is None:
            return np.stack([self.samples(g).genomes() for g in range(self.completed)])
        if individual is None:
            return self.samples(generation).genomes()
        return self.samples(generation).genome(int(individual))

    def _lineage_population(self, generation, individual):
        """:meth:`population` of a GA's lineages: the genomes asked for and their ancestors,
        rebuilt once and kept (:func:`synapto.lineage.rebuild`)."""
        P = int(self._f["fitness"].shape[1])
        gens = range(self.completed) if generation is None else [generation + self.completed * (generation < 0)]
        wanted = [(g, r) for g in gens for r in (range(P) if individual is None else [int(individual)])]
        for g, r in wanted:
            if not 0 <= g < self.completed or not 0 <= r < P:
                raise RunFileError(f"{str(self.path)!r} has no completed generation {g} individual {r}")
        cache = self.__dict__.setdefault("_genomes", {})
        missing = [w for w in wanted if w not in cache]
        if missing:
            cache.update(
                rebuild(
                    lambda g: self.samples(g) if 0 <= g < self.completed else None,
                    missing,
                    self._agent,
                    repr(str(self.path)),
                )
            )
        out = np.stack([cache[w] for w in wanted])
        if generation is None and individual is None:
            return out.reshape(len(gens), P, -1)
        return out[0] if generation is not None and individual is not None else out

    def _agent(self):
        """The run's agent (generation 0 of a lineage file redraws its ``init_genome``)."""
        return agent_of(self.config)

    @property
    def has_validation(self) -> bool:
        """The file has the validation datasets (they may hold zero candidates)."""
        self._need("evolve")
        return "validation/steps" in self._f

    @property
    def validation_episodes(self) -> int:
        """Validation episodes per candidate (V)."""
        self._need("evolve")
        return int(self._f["validation/returns"].shape[-1])

    def validation_individual(self, generation: int | None = None, slot: int | None = None):
        """``(G, K)`` the individuals validated in each generation, as :meth:`fitness`."""
        return self._rows("validation/individual", generation, slot)

    def validation_fitness(self, generation: int | None = None, slot: int | None = None):
        """``(G, K)`` their validation fitness."""
        return self._rows("validation/fitness", generation, slot)

    def validation_returns(self, generation: int | None = None, slot: int | None = None):
        """``(G, K, V)`` their validation returns."""
        return self._rows("validation/returns", generation, slot)

    def validation_steps(self, generation: int | None = None, slot: int | None = None):
        """``(G, K)`` env steps of their validation."""
        return self._rows("validation/steps", generation, slot)

    def validation_seeds(self, generation: int | None = None):
        """``(G, V)`` the validation episodes' seeds (the same for every candidate)."""
        return self._rows("validation/seeds", generation, None)

    @property
    def tested(self) -> bool:
        """The champion is tested: the evolution run finished."""
        self._need("evolve")
        return bool(self._f["champion/tested"][0]) if "champion/tested" in self._f else False

    def champion(self) -> Champion:
        self._need("evolve")
        c = self._f["champion"]
        norm = (c["obs_mean"][()], c["obs_std"][()]) if "obs_mean" in c else None
        sel = float(c["selection_fitness"][0]) if "selection_fitness" in c else None
        ends = (c["test_outcomes"][()], c["test_action_cost"][()]) if "test_outcomes" in c else (None, None)
        return Champion(
            c["genome"][()],
            float(c["fitness"][0]),
            int(c["generation"][0]),
            c["test_seeds"][()],
            c["test_returns"][()],
            c["test_steps"][()],
            self.tested,
            norm,
            sel,
            *ends,
        )

    def obs_norm(self, generation: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The observation normalisation generation ``generation`` ran with (None: raw observations)."""
        self._need("evolve")
        if "obs_norm/mean" not in self._f:
            return None
        return self._f["obs_norm/mean"][generation], self._f["obs_norm/std"][generation]

    def strategy_names(self) -> list[str]:
        """The strategy's own per-generation datasets (``/strategy/<name>``)."""
        self._need("evolve")
        return sorted(self._f["strategy"].keys()) if "strategy" in self._f else []

    def strategy(self, name: str, generation: int | None = None):
        """``/strategy/<name>``: the completed rows, or one generation's."""
        if name not in self.strategy_names():
            raise RunFileError(f"{str(self.path)!r} has no /strategy/{name}")
        return self._rows(f"strategy/{name}", generation, None)

    def selection(self) -> SelectionData | None:
        """The final selection (None for a run without one)."""
        self._need("evolve")
        if "selection/chosen" not in self._f:
            return None
        g = self._f["selection"]
        return SelectionData(
            **{k: g[k][()] for k in ("genomes", "generation", "chosen_on", "fitness", "returns", "steps", "seeds")},
            chosen=int(g["chosen"][0]),
        )

    # ------------------------------------------------------------------ PPO runs
    def _attr(self, name: str) -> int:
        self._need("ppo")
        return int(self._f.attrs[name])

    @property
    def ranks(self) -> int:
        """MPI ranks of a PPO run (a resume needs as many)."""
        return self._attr("ranks")

    @property
    def obs_dim(self) -> int:
        return self._attr("obs_dim")

    @property
    def act_dim(self) -> int:
        return self._attr("act_dim")

    @property
    def discrete(self) -> bool:
        return bool(self._attr("discrete"))

    @property
    def n_pi(self) -> int:
        """Parameters of the policy network."""
        return self._attr("n_pi")

    def checkpoint(self) -> dict[str, np.ndarray]:
        """The optimiser state after the last completed epoch."""
        self._need("ppo")
        return read_checkpoint_slot(self._f, self.completed, self.path)

    def params(self, which: str = "latest") -> tuple[np.ndarray, np.ndarray, str]:
        """``(pi, v, label)`` of ``final``, ``latest`` (final, else the last checkpoint) or an epoch."""
        self._need("ppo")
        cfg = self.config
        return read_params(self._f, self.completed, int(cfg["epochs"]), int(cfg["save_freq"]), which, self.path)

    def policy_norm(self, epoch: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The observation normalisation of the policy after ``epoch`` (None without obs_norm)."""
        self._need("ppo")
        if "obs_norm/mean" not in self._f:
            return None
        if not 0 <= epoch < self.completed:
            raise RunFileError(f"{str(self.path)!r} has no epoch {epoch} (completed epochs: {self.completed})")
        return self._f["obs_norm/mean"][epoch], self._f["obs_norm/std"][epoch]

    def policy_test(self) -> dict[str, np.ndarray] | None:
        """The final policy's test (``seeds``, ``returns``, ``steps``, and ``outcomes`` and
        ``action_cost`` where the file has them); None before it ran or without one."""
        self._need("ppo")
        if "test/tested" not in self._f or int(self._f["test/tested"][0]) != 1:
            return None
        names = ("seeds", "returns", "steps", "outcomes", "action_cost")
        return {k: self._f[f"test/{k}"][()] for k in names if f"test/{k}" in self._f}

    def progress_rows(self) -> list[dict]:
        """The rows of Spinning Up's progress.txt (Time from ``/timing/Time``)."""
        self._need("ppo")
        cols = {name: self.stats(name) for name in PPO_STATS}
        cols["Time"] = self.timing("Time")
        return [{name: cols[name][i] for name in PROGRESS_COLUMNS} for i in range(self.completed)]


def _guard(fn):
    """``fn`` (a RunData method) with HDF5 read errors turned into one-line RunFileErrors."""

    @functools.wraps(fn)
    def guarded(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except RunFileError:
            raise
        except (OSError, RuntimeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RunFileError(f"{str(self.path)!r} is corrupted: {first}") from None

    return guarded


for _name, _value in list(vars(RunData).items()):
    if _name.startswith("__") or _name in ("close", "_need"):
        continue
    if isinstance(_value, property):
        setattr(RunData, _name, property(_guard(_value.fget)))
    elif callable(_value):
        setattr(RunData, _name, _guard(_value))


class PPORun(RunData):
    """A PPO run file read back: ``RunData(path, kind="ppo")``."""

    def __init__(self, path: str | Path):
        super().__init__(path, kind="ppo")
