"""The evolution run's configuration, frozen dataclasses validated on creation: what a run
computes (:class:`EvolveConfig`, and the keys its config files may hold) and how it is
executed (:class:`RunOptions`).

Precedence: dataclass defaults < ``--config FILE.toml`` (:mod:`synapto.config`) <
command-line options.  Library code never reads argv; the evolve command
(:mod:`synapto.evolution.command`) and the Python API (:mod:`synapto.api`) build these objects.
Errors name a field as its user gave it (:func:`synapto.errors.option`): ``population must be
...`` from Python, ``--population must be ...`` from the command line (a config file's key is
that option's name).  The env id is checked when the config is built (registered with
gymnasium, or ``module:Env-v0`` whose module registers it on import): an env registered by
your own code must be registered before.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from synapto.errors import UsageError, on_command_line, option
from synapto.options import STRATEGY_SHORTHANDS

#: whether building an EvolveConfig looks its env id up (not for a stored config: :meth:`EvolveConfig.from_json`)
_CHECK_ENV = contextvars.ContextVar("synapto_check_env", default=True)


#: the default experiment's strategy (:mod:`synapto.defaults`, ``synapto/defaults.toml``)
DEFAULT_STRATEGY = "cmaes"
#: its strategy options: CMA-ES cutting the network down to half of its connections by magnitude
DEFAULT_STRATEGY_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        "sigma": 0.1,
        "separable": False,
        "init_std": 0.1,
        "prune": True,
        "prune_to": 0.5,
        "prune_by": "magnitude",
        "prune_start": 0,
        "prune_end": 60,
        "prune_every": 5,
    }
)


class _StrategysOwn(Mapping[str, Any]):
    """``strategy_options`` left out (an empty mapping, told apart by identity): the default
    experiment's for its strategy, none for another (:class:`EvolveConfig`)."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<the strategy's in the default experiment>"

    __hash__ = object.__hash__  # one immutable object: a dataclass default


#: the default of ``EvolveConfig.strategy_options``
STRATEGYS_OWN: Mapping[str, Any] = _StrategysOwn()


@dataclass(frozen=True)
class EvolveConfig:
    """Everything that determines an evolution run's results.

    The defaults are the default experiment's (``synapto/defaults.toml``, what ``synapto
    evolve`` runs with no run options; a test keeps them equal): ``EvolveConfig()`` is CMA-ES on
    a hebbian-dag 8-8 cut down to half of its connections on LunarLander-v3 within 2.75 M env
    steps.  ``strategy_options`` left out follow the strategy: the default experiment's for
    ``cmaes``, none (the strategy's own defaults) for any other; given, they are the options
    (``EvolveConfig(strategy_options={"sigma": 0.2})`` is a dense CMA-ES).  A config file and
    the command line fill what they leave out the same way, but lay the strategy options they
    give over the default experiment's (``--sigma 0.2`` keeps its pruning): see
    :func:`synapto.defaults.with_defaults`."""

    env: str = "LunarLander-v3"  #: gymnasium environment id
    agent: str = "hebbian-dag"  #: pruned-mlp, hebbian-dag, or package.module:Class
    population: int = 64  #: individuals per generation (>= 2)
    generations: int = 100_000  #: generations to run (at most, with ``max_env_steps``)
    #: env-step budget of training + validation episodes: the run ends after the generation
    #: that reaches it (0: no budget; the final selection and test come on top)
    max_env_steps: int = 2_750_000
    hidden: tuple[int, ...] = (8, 8)  #: hidden layer sizes
    episodes: int = 1  #: episodes averaged per fitness evaluation
    seed: int = 0  #: run seed; every random number of the run derives from it
    test_episodes: int = 100  #: episodes of the final champion test (0 skips it)
    agent_options: Mapping[str, Any] = field(default_factory=dict)  #: agent-specific options
    #: how the run's environments are made and its episodes run (:class:`synapto.envs.EnvOptions`):
    #: ``reward_shift`` (synapto's own) and keyword arguments of ``gymnasium.make`` (the env's
    #: constructor's, and ``max_episode_steps``)
    env_options: Mapping[str, Any] = field(default_factory=dict)
    crn: bool = True  #: common random numbers: a generation's individuals share training episodes
    validate_top: int = 2  #: candidates re-evaluated on validation episodes (0: the elite count)
    validate_episodes: int = 8  #: validation episodes per candidate (0: no validation)
    #: how the next generation is made: ga, openai-es, pgpe, cmaes, ars (synapto.evolution.strategies)
    strategy: str = DEFAULT_STRATEGY
    #: the strategy's options (see ``Strategy.OPTIONS``); unknown names are refused; left out
    #: (:data:`STRATEGYS_OWN`): :data:`DEFAULT_STRATEGY_OPTIONS` for the default strategy, none for another
    strategy_options: Mapping[str, Any] = STRATEGYS_OWN
    #: normalise observations by running statistics of the training episodes (synapto.evolution.obs_norm)
    obs_norm: bool = False
    #: after the last generation, the strategy's final candidates are re-evaluated on this many fresh
    #: episodes of the SELECT stream and the best becomes the champion (0: the strategy's champion)
    select_episodes: int = 30
    #: for information: the per-worker population ``population`` was resolved from
    #: (:func:`resolve_population`); None when the population was given as such.  Not part of
    #: the run's identity: ``population`` is what the run computes with.
    population_per_worker: int | None = None

    # Fields that change what a run computes; --resume refuses to change them.
    IDENTITY = (
        "env",
        "env_options",
        "agent",
        "population",
        "hidden",
        "episodes",
        "seed",
        "agent_options",
        "crn",
        "validate_top",
        "validate_episodes",
        "strategy",
        "strategy_options",
        "obs_norm",
        "select_episodes",
    )

    def __post_init__(self):
        if isinstance(self.hidden, (list, tuple)):
            object.__setattr__(self, "hidden", tuple(self.hidden))
        if self.strategy_options is STRATEGYS_OWN:  # left out: the strategy's in the default experiment
            own = DEFAULT_STRATEGY_OPTIONS if self.strategy == DEFAULT_STRATEGY else {}
            object.__setattr__(self, "strategy_options", dict(own))
        for name in ("agent_options", "env_options", "strategy_options"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise UsageError(f"{name} must be a table of option = value, got {value!r}")
            object.__setattr__(self, name, dict(value))
        self.validate()

    def validate(self) -> None:
        def need(ok: bool, msg: str):
            if not ok:
                raise UsageError(msg)

        def integer(v) -> bool:  # true and false are not numbers here
            return isinstance(v, int) and not isinstance(v, bool)

        need(
            integer(self.population) and self.population >= 2,
            f"{option('population')} must be an integer >= 2, got {self.population!r}",
        )
        need(
            integer(self.generations) and self.generations >= 1,
            f"{option('generations')} must be an integer >= 1, got {self.generations!r}",
        )
        need(
            integer(self.max_env_steps) and self.max_env_steps >= 0,
            f"{option('max_env_steps')} must be an integer >= 0, got {self.max_env_steps!r}",
        )
        need(
            isinstance(self.hidden, tuple) and all(integer(h) and h > 0 for h in self.hidden),
            f"{option('hidden')} must be positive integers (none: no hidden layer), got {_show(self.hidden)!r}",
        )
        need(
            integer(self.episodes) and self.episodes >= 1,
            f"{option('episodes')} must be a positive integer, got {self.episodes!r}",
        )
        need(
            integer(self.seed) and self.seed >= 0, f"{option('seed')} must be a non-negative integer, got {self.seed!r}"
        )
        need(
            integer(self.test_episodes) and self.test_episodes >= 0,
            f"{option('test_episodes')} must be an integer >= 0, got {self.test_episodes!r}",
        )
        need(isinstance(self.env, str) and bool(self.env), f"{option('env')} must be a gymnasium id, got {self.env!r}")
        if _CHECK_ENV.get():
            from synapto.envs import check_env_id

            check_env_id(self.env)
        need(isinstance(self.crn, bool), f"{option('crn')} must be true or false, got {self.crn!r}")
        need(
            integer(self.validate_top) and 0 <= self.validate_top <= self.population,
            f"{option('validate_top')} must be an integer in 0..population ({self.population}), "
            f"got {self.validate_top!r}",
        )
        need(
            integer(self.validate_episodes) and self.validate_episodes >= 0,
            f"{option('validate_episodes')} must be an integer >= 0, got {self.validate_episodes!r}",
        )
        need(isinstance(self.obs_norm, bool), f"{option('obs_norm')} must be true or false, got {self.obs_norm!r}")
        need(
            integer(self.select_episodes) and self.select_episodes >= 0,
            f"{option('select_episodes')} must be an integer >= 0, got {self.select_episodes!r}",
        )
        _check_share(self.population_per_worker)
        _ = self.envs  # bad env_options are refused here, in one line
        from synapto.evolution.worker.fast_box2d import check_backend

        check_backend(self.env, self.envs)
        need(isinstance(self.strategy, str), f"{option('strategy')} must be a name, got {self.strategy!r}")
        need(isinstance(self.agent, str) and bool(self.agent), f"{option('agent')} must be a name, got {self.agent!r}")
        from synapto.evolution.strategies import strategy_class

        cls = strategy_class(self.strategy)
        cls.check_population(self.population, cls.check_options(self.strategy_options))

    @property
    def envs(self):
        """The :class:`synapto.envs.EnvOptions` of ``env_options`` (validated)."""
        from synapto.envs import EnvOptions

        return EnvOptions.parse(self.env_options)

    @property
    def make_kwargs(self) -> dict[str, Any]:
        """``gymnasium.make``'s keyword arguments for this run's episodes."""
        return self.envs.make_kwargs()

    @property
    def elite_count(self) -> int:
        """Elites, hall-of-fame size and recombination swaps per generation: ceil(P/8)."""
        return -(-self.population // 8)

    @property
    def validation_count(self) -> int:
        """Candidates validated per generation (0 when validation is off)."""
        if self.validate_episodes == 0:
            return 0
        return self.validate_top or self.elite_count

    def goes_on(self, generation: int, env_steps: int) -> bool:
        """Whether a run that completed ``generation`` generations and ``env_steps`` training
        and validation env steps runs another generation."""
        return generation < self.generations and not (self.max_env_steps and env_steps >= self.max_env_steps)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        if self.population_per_worker is None:  # the config text of a run that gave its population as such
            del data["population_per_worker"]
        return json.dumps(data, sort_keys=True)

    @property
    def options(self) -> dict[str, Any]:
        """The strategy's options completed with its defaults."""
        from synapto.evolution.strategies import strategy_class

        return strategy_class(self.strategy).check_options(self.strategy_options)

    @classmethod
    def from_toml(cls, path, **overrides) -> EvolveConfig:
        """The config of a TOML file, or of a shipped config by name (``"quickstart"``), read
        as ``evolve --config`` reads it: the keys it leaves out take the default experiment's
        values (:func:`synapto.defaults.with_defaults`); ``overrides`` (field values) win over
        the file.  The file's run keys (``workers``, ``out``, ``task_timeout``) are not part of a
        config; a ``population_per_worker`` is resolved with the file's ``workers`` (1 without)."""
        from synapto.config import load_toml, one_seed
        from synapto.defaults import with_defaults
        from synapto.options import hidden_layers, strategy_options, table

        values = load_toml(path, EVOLVE_KEYS)
        resolve_population(values, values.get("workers", 0))
        for key in EVOLVE_RUN_KEYS:
            values.pop(key, None)
        values = with_defaults(values, EVOLVE_KEYS, overrides.get("strategy"))
        if "hidden" in values:
            values["hidden"] = hidden_layers(values["hidden"])
        opts = strategy_options(values, None)
        if opts:
            values["strategy_options"] = opts
        for key in ("agent_options", "env_options"):
            found = table(values, key)
            if found:
                values[key] = found
        if "seed" in values and "seed" not in overrides:
            values["seed"] = one_seed(values["seed"], path)
        try:
            return cls(**{**values, **overrides})
        except TypeError as exc:
            raise UsageError(f"bad option value: {exc}") from None

    @classmethod
    def from_json(cls, text: str) -> EvolveConfig:
        """The config a run file stores; its env id is not looked up (it was when the run was
        made; reading a run file needs no env: an env module absent here is no error yet)."""
        data = {**STORED_DEFAULTS, **json.loads(text)}  # a field the file predates: as then
        if "mutation_std" in data:  # a run file of the GA-only format
            data["strategy_options"] = {"mutation_std": data.pop("mutation_std")}
        known = {f.name for f in dataclasses.fields(cls)}
        token = _CHECK_ENV.set(False)
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        finally:
            _CHECK_ENV.reset(token)

    def differences(self, other: EvolveConfig, names=None) -> list[str]:
        """``name: ours (run file) vs theirs (command line, or config from Python)`` for every
        identity field that differs."""
        given = "command line" if on_command_line() else "config"
        out = []
        for name in names or self.IDENTITY:
            a, b = getattr(self, name), getattr(other, name)
            if name == "strategy_options" and self.strategy == other.strategy:
                a, b = self.options, other.options  # defaults spelled out or not: the same run
            if a != b:
                out.append(f"{name}: {_show(a)} (run file) vs {_show(b)} ({given})")
        return out


#: the defaults of the fields a run file of an earlier version may lack: those in force when
#: they were added (the GA's), so that such a file reads as the run it made
STORED_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "env": "BipedalWalker-v3",
        "generations": 100,
        "max_env_steps": 0,
        "episodes": 4,
        "validate_top": 0,
        "validate_episodes": 16,
        "strategy": "ga",
        "strategy_options": {},
        "obs_norm": False,
        "select_episodes": 0,
    }
)


def _show(v):
    return list(v) if isinstance(v, tuple) else v


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


#: keys of an ``evolve`` config file that say how a run is executed, not what it computes
EVOLVE_RUN_KEYS = frozenset({"workers", "out", "task_timeout"})
#: every key an ``evolve`` config file (and the command line) may set: EvolveConfig's fields,
#: the run keys and the strategy shorthands (``sigma``, ``lr``, ...)
EVOLVE_KEYS = frozenset({f.name for f in dataclasses.fields(EvolveConfig)} | EVOLVE_RUN_KEYS | set(STRATEGY_SHORTHANDS))


@dataclass(frozen=True)
class RunOptions:
    """How a run is executed; none of these change its results.  Validated on creation:
    a bad value is a one-line :class:`UsageError` naming the command-line option."""

    schedule: str = "dynamic"  #: "dynamic" or "waves" (see synapto.parallel.farm)
    on_error: str = "abort"  #: "abort": checkpoint and stop; "skip": fitness -inf, go on
    checkpoint_every: int = 1  #: generations between checkpoints
    #: "auto": evaluate chunks of individuals in lockstep on a numpy-batched env where the env and
    #: agent support it (synapto.evolution.worker.batched); "off": one environment at a time
    batch: str = "auto"
    #: "keys": a centre strategy's tasks carry noise keys (:mod:`synapto.noise`), its generation
    #: goes to each worker once; "genomes": every task carries its genome
    wire: str = "keys"

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
