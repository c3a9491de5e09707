"""The evolution run's configuration, frozen dataclasses validated on creation: what a run
computes (:class:`EvolveConfig`, whose fields are ``evolve``'s options, declared once:
:mod:`synapto.common.declare`), the keys its config files may hold, and the one reading of a run's
values from a config file, the default experiment and the options given (:func:`file_values`,
:func:`run_values`).  How a run is executed: :mod:`synapto.evolution.run_options`
(:class:`RunOptions`, :class:`~synapto.evolution.run_options.EvolveRun`).

Precedence: dataclass defaults < ``--config FILE.toml`` (:mod:`synapto.common.config`) <
command-line options.  Library code never reads argv; the evolve command
(:mod:`synapto.evolution.command`) and the Python API (:mod:`synapto.api`) build these objects.
Errors name a field as its user gave it (:func:`synapto.common.errors.option`): ``population must be
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
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from synapto import defaults as experiment
from synapto.common.config import load_toml, one_seed
from synapto.common.declare import flag, names, opt
from synapto.common.errors import UsageError, on_command_line, option
from synapto.common.options import hidden_layers, key_values, table
from synapto.envs import EnvOptions, check_backend, check_env_id
from synapto.evolution.run_options import (
    CHOOSE,
    EVOLVE_RUN_KEYS,
    RUN,
    SEARCH,
    STRATEGY_SHORTHANDS,
    EvolveRun,
    RunOptions,
    Shorthands,
    _check_share,
    resolve_population,
)
from synapto.evolution.strategies import strategy_class

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

_RUN_VALUE = dict(panel=RUN, config=True, identity=True)
_CHOOSE_VALUE = dict(panel=CHOOSE, config=True, identity=True)


def _table(panel: str, name: str) -> dict:
    """A table of options, given on the command line as ``--NAME KEY=VALUE`` (repeatable)."""
    return dict(panel=panel, name=name, cli=list[str] | None, shown=None, show_default=False, table=True, identity=True)


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

    env: str = opt(
        "LunarLander-v3",
        help="Gymnasium environment id; module:Env-v0 imports module first.",
        panel=RUN,
        config=True,
        identity=True,
    )
    #: how the run's environments are made and its episodes run (:class:`synapto.envs.EnvOptions`):
    #: ``reward_shift`` (synapto's own) and keyword arguments of ``gymnasium.make`` (the env's
    #: constructor's, and ``max_episode_steps``)
    env_options: Mapping[str, Any] = opt(
        factory=dict,
        help="A keyword argument of the env's constructor, KEY=VALUE (repeatable), e.g. continuous=true.",
        **_table(RUN, "env_option"),
    )
    agent: str = opt(
        "hebbian-dag", help="pruned-mlp, hebbian-dag, or package.module:Class.", panel=RUN, config=True, identity=True
    )
    agent_options: Mapping[str, Any] = opt(
        factory=dict,
        help="An agent option, KEY=VALUE (repeatable), e.g. neuromodulate=true (hebbian-dag).",
        **_table(RUN, "agent_option"),
    )
    hidden: tuple[int, ...] = opt(
        (8, 8),
        help='Hidden layer sizes: --hidden 8 8, --hidden 8,8 or --hidden "[8,8]" (as ppo --hid); '
        "--hidden 0: none (a linear policy).",
        cli=list[str],
        shown=["8", "8"],
        multi=True,
        **_RUN_VALUE,
    )
    population: int = opt(64, help="Individuals per generation.", **_RUN_VALUE)
    #: for information: the per-worker population ``population`` was resolved from; None when the
    #: population was given as such.  Not part of the run's identity: ``population`` is.
    population_per_worker: int | None = opt(
        None,
        help="Individuals per generation per worker, instead of --population: the population is this times "
        "the workers (times 1 in a serial run), resolved once at the start and recorded in the run file.",
        show_default="off",
        panel=RUN,
        config=True,
    )
    generations: int = opt(100_000, help="Generations to run (at most, with --max-env-steps).", panel=RUN, config=True)
    max_env_steps: int = opt(
        2_750_000,
        help="Env-step budget of training and validation episodes: the run ends after the generation that "
        "reaches it; 0 for none.",
        panel=RUN,
        config=True,
    )
    episodes: int = opt(1, help="Episodes averaged per fitness.", **_RUN_VALUE)
    seed: int = opt(
        0, help="Run seed(s); several run one after another.", cli=list[int], shown=[0], multi=True, **_RUN_VALUE
    )
    strategy: str = opt(
        DEFAULT_STRATEGY,
        help="How the next generation is made: ga, openai-es, pgpe, cmaes or ars (docs/strategies.md).",
        panel=SEARCH,
        config=True,
        identity=True,
    )
    #: the strategy's options (see ``Strategy.OPTIONS``); unknown names are refused; left out
    #: (:data:`STRATEGYS_OWN`): :data:`DEFAULT_STRATEGY_OPTIONS` for the default strategy, none for another
    strategy_options: Mapping[str, Any] = opt(
        STRATEGYS_OWN,
        help="Any other strategy option, KEY=VALUE (repeatable); docs/strategies.md lists them with defaults.",
        **_table(SEARCH, "strategy_option"),
    )
    obs_norm: bool = opt(
        False,
        help="Normalise observations by running statistics of the training episodes, frozen per generation.",
        flags=("--obs-norm/--no-obs-norm",),
        panel=SEARCH,
        config=True,
        identity=True,
    )
    crn: bool = opt(
        True,
        help="Common random numbers: every individual of a generation gets the same training episodes.",
        flags=("--crn/--no-crn",),
        panel=SEARCH,
        config=True,
        identity=True,
    )
    validate_top: int = opt(
        2,
        help="Candidates (top by training fitness) re-evaluated each generation on validation episodes; "
        "0 means the elite count, ceil(population/8).",
        **_CHOOSE_VALUE,
    )
    validate_episodes: int = opt(
        8,
        help="Fresh validation episodes per candidate; the best-ever agent and the hall of fame are chosen "
        "on them. 0 chooses on training fitness, as the reference does.",
        **_CHOOSE_VALUE,
    )
    select_episodes: int = opt(
        30,
        help="After the last generation, re-evaluate the strategy's final candidates on this many fresh "
        "episodes and make the best the champion; 0 keeps the strategy's champion.",
        **_CHOOSE_VALUE,
    )
    test_episodes: int = opt(100, help="Episodes of the final champion test; 0 skips it.", panel=CHOOSE, config=True)

    #: the fields that change what a run computes (declared ``identity``); --resume refuses to change them
    IDENTITY: ClassVar[tuple[str, ...]] = ()

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
        for name, low, what in _COUNTS:
            value = getattr(self, name)
            _need(_integer(value) and value >= low, f"{option(name)} must be {what}, got {value!r}")
        _need(
            isinstance(self.hidden, tuple) and all(_integer(h) and h > 0 for h in self.hidden),
            f"{option('hidden')} must be positive integers (none: no hidden layer), got {_show(self.hidden)!r}",
        )
        _need(isinstance(self.env, str) and bool(self.env), f"{option('env')} must be a gymnasium id, got {self.env!r}")
        if _CHECK_ENV.get():
            check_env_id(self.env)
        for name in ("crn", "obs_norm"):
            _need(
                isinstance(getattr(self, name), bool),
                f"{option(name)} must be true or false, got {getattr(self, name)!r}",
            )
        _need(
            _integer(self.validate_top) and 0 <= self.validate_top <= self.population,
            f"{option('validate_top')} must be an integer in 0..population ({self.population}), "
            f"got {self.validate_top!r}",
        )
        _check_share(self.population_per_worker)
        _ = self.envs  # bad env_options are refused here, in one line

        check_backend(self.env, self.envs)
        _need(isinstance(self.strategy, str), f"{option('strategy')} must be a name, got {self.strategy!r}")
        _need(isinstance(self.agent, str) and bool(self.agent), f"{option('agent')} must be a name, got {self.agent!r}")

        cls = strategy_class(self.strategy)
        cls.check_population(self.population, cls.check_options(self.strategy_options))

    @property
    def envs(self):
        """The :class:`synapto.envs.EnvOptions` of ``env_options`` (validated)."""
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
        return strategy_class(self.strategy).check_options(self.strategy_options)

    @classmethod
    def from_toml(cls, path, **overrides) -> EvolveConfig:
        """The config of a TOML file, or of a shipped config by name (``"quickstart"``), read
        as ``evolve --config`` reads it: the keys it leaves out take the default experiment's
        values (:func:`synapto.defaults.with_defaults`); ``overrides`` (field values) win over
        the file.  The file's run keys (``workers``, ``out``, ``task_timeout``) are not part of a
        config; a ``population_per_worker`` is resolved with the file's ``workers`` (1 without)."""
        values = run_values(file_values(path), strategy=overrides.get("strategy"))
        resolve_population(values, values.get("workers", 0))
        for key in EVOLVE_RUN_KEYS:
            values.pop(key, None)
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


EvolveConfig.IDENTITY = names(EvolveConfig, identity=True)

#: EvolveConfig's counts, the lowest value each takes and how an error says so, checked in this order
_COUNTS = (
    ("population", 2, "an integer >= 2"),
    ("generations", 1, "an integer >= 1"),
    ("max_env_steps", 0, "an integer >= 0"),
    ("episodes", 1, "a positive integer"),
    ("seed", 0, "a non-negative integer"),
    ("test_episodes", 0, "an integer >= 0"),
    ("validate_episodes", 0, "an integer >= 0"),
    ("select_episodes", 0, "an integer >= 0"),
)


def _need(ok: bool, msg: str) -> None:
    if not ok:
        raise UsageError(msg)


def _integer(v) -> bool:
    """An integer (true and false are not numbers here)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _show(v):
    return list(v) if isinstance(v, tuple) else v


#: the classes whose options make ``evolve``'s command line, in the order of its help
EVOLVE_OPTIONS = (EvolveConfig, Shorthands, EvolveRun, RunOptions)
#: every key an ``evolve`` config file (and the command line) may set: EvolveConfig's fields,
#: the run keys and the strategy shorthands (``sigma``, ``lr``, ...)
EVOLVE_KEYS = frozenset({f.name for f in dataclasses.fields(EvolveConfig)} | EVOLVE_RUN_KEYS | set(STRATEGY_SHORTHANDS))
#: evolve's options that a config file (or the default experiment) may set too: given on the
#: command line, they win over the file's value
VALUE_OPTIONS = names(*EVOLVE_OPTIONS, config=True)
#: EvolveConfig's tables of options (``--agent-option KEY=VALUE`` ...)
TABLES = names(EvolveConfig, table=True)


def file_values(path) -> dict:
    """An ``evolve`` config file's own values (a file, or a shipped config's name)."""
    return load_toml(path, EVOLVE_KEYS)


def run_values(file: dict, given=None, tables=None, defaults: bool = True, strategy=None) -> dict:
    """A run's values: (``defaults``) the default experiment's, a config file's (``file``, its
    :func:`file_values`) over them, the options ``given`` over those (``hidden`` as layer sizes), and the
    KEY=VALUE items of ``tables`` (``{"agent_options": ["a=1"]}``) over the file's tables.
    ``strategy``: the strategy whose options the default experiment keeps (else the given's,
    else the file's)."""
    given, tables = dict(given or {}), dict(tables or {})
    values = dict(file)
    for one, other in (("population", "population_per_worker"), ("population_per_worker", "population")):
        if one in given:  # the command line's choice wins over the file's other one
            values.pop(other, None)
    if defaults:  # the default experiment (synapto/defaults.py), changed by the file and options
        population = "population" in values or "population" in given
        values = experiment.with_defaults(values, EVOLVE_KEYS, given.get("strategy", strategy))
        if not population and ("population_per_worker" in values or "population_per_worker" in given):
            values.pop("population")  # resolved from the share per worker, not the default's
    values.update(given)
    if "hidden" in values:  # --hidden 0: no hidden layer; hidden = 8: one layer
        values["hidden"] = hidden_layers(values["hidden"])
    found = strategy_options(values, tables.pop("strategy_options", None))
    if found:
        values["strategy_options"] = found
    for key in (k for k in TABLES if k != "strategy_options"):  # (laid over the shorthands above)
        found = {**table(values, key), **key_values(flag(EvolveConfig, key), tables.get(key))}
        if found:
            values[key] = found
    return values


def strategy_options(values: dict, extra: list[str] | None) -> dict:
    """Pop the strategy's options out of ``values`` (a TOML ``[strategy_options]`` table,
    then the shorthand keys, then ``--strategy-option KEY=VALUE``, later ones winning)."""
    opts = table(values, "strategy_options")
    for key in STRATEGY_SHORTHANDS:
        if key in values:
            opts[key] = values.pop(key)
    opts.update(key_values(flag(EvolveConfig, "strategy_options"), extra))
    if "prune" in opts and isinstance(opts["prune"], str):
        word = opts["prune"].lower()
        if word not in ("on", "off"):
            raise UsageError(f"{option('prune')} must be 'on' or 'off', got {opts['prune']!r}")
        opts["prune"] = word == "on"
    return opts
