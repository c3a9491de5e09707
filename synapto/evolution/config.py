"""The evolution run's configuration, frozen dataclasses validated on creation: what a run
computes (:class:`EvolveConfig`, and the keys its config files may hold) and how it is
executed (:class:`RunOptions`).

Precedence: dataclass defaults < ``--config FILE.toml`` (:mod:`synapto.config`) <
command-line options.  Library code never reads argv; the evolve command
(:mod:`synapto.evolution.command`) and the Python API (:mod:`synapto.api`) build these objects.
Errors name the command-line option of a field (``--population must be ...``): the command line is where most runs
are configured, and a TOML key is that option's name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from synapto.errors import UsageError
from synapto.options import STRATEGY_SHORTHANDS


@dataclass(frozen=True)
class EvolveConfig:
    """Everything that determines an evolution run's results."""

    env: str = "BipedalWalker-v3"  #: gymnasium environment id
    agent: str = "hebbian-dag"  #: pruned-mlp, hebbian-dag, or package.module:Class
    population: int = 64  #: individuals per generation (>= 2)
    generations: int = 100  #: generations to run (at most, with ``max_env_steps``)
    #: env-step budget of training + validation episodes: the run ends after the generation
    #: that reaches it (0: no budget; the final selection and test come on top)
    max_env_steps: int = 0
    hidden: tuple[int, ...] = (8, 8)  #: hidden layer sizes
    episodes: int = 4  #: episodes averaged per fitness evaluation
    seed: int = 0  #: run seed; every random number of the run derives from it
    test_episodes: int = 100  #: episodes of the final champion test (0 skips it)
    agent_options: Mapping[str, Any] = field(default_factory=dict)  #: agent-specific options
    #: how the run's environments are made and its episodes run (:class:`synapto.envs.EnvOptions`):
    #: ``reward_shift`` (synapto's own) and keyword arguments of ``gymnasium.make`` (the env's
    #: constructor's, and ``max_episode_steps``)
    env_options: Mapping[str, Any] = field(default_factory=dict)
    crn: bool = True  #: common random numbers: a generation's individuals share training episodes
    validate_top: int = 0  #: candidates re-evaluated on validation episodes (0: the elite count)
    validate_episodes: int = 16  #: validation episodes per candidate (0: no validation)
    #: how the next generation is made: ga, openai-es, pgpe, cmaes (synapto.evolution.strategies)
    strategy: str = "ga"
    #: the strategy's options (see ``Strategy.OPTIONS``); unknown names are refused
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    #: normalise observations by running statistics of the training episodes (synapto.evolution.obs_norm)
    obs_norm: bool = False
    #: after the last generation, the strategy's final candidates are re-evaluated on this many fresh
    #: episodes of the SELECT stream and the best becomes the champion (0: the strategy's champion)
    select_episodes: int = 0

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
            f"--population must be an integer >= 2, got {self.population!r}",
        )
        need(
            integer(self.generations) and self.generations >= 1,
            f"--generations must be an integer >= 1, got {self.generations!r}",
        )
        need(
            integer(self.max_env_steps) and self.max_env_steps >= 0,
            f"--max-env-steps must be an integer >= 0, got {self.max_env_steps!r}",
        )
        need(
            isinstance(self.hidden, tuple) and all(integer(h) and h > 0 for h in self.hidden),
            f"--hidden must be positive integers (none: no hidden layer), got {_show(self.hidden)!r}",
        )
        need(
            integer(self.episodes) and self.episodes >= 1,
            f"--episodes must be a positive integer, got {self.episodes!r}",
        )
        need(integer(self.seed) and self.seed >= 0, f"--seed must be a non-negative integer, got {self.seed!r}")
        need(
            integer(self.test_episodes) and self.test_episodes >= 0,
            f"--test-episodes must be an integer >= 0, got {self.test_episodes!r}",
        )
        need(isinstance(self.env, str) and bool(self.env), f"--env must be a gymnasium id, got {self.env!r}")
        need(isinstance(self.crn, bool), f"--crn must be true or false, got {self.crn!r}")
        need(
            integer(self.validate_top) and 0 <= self.validate_top <= self.population,
            f"--validate-top must be an integer in 0..population ({self.population}), got {self.validate_top!r}",
        )
        need(
            integer(self.validate_episodes) and self.validate_episodes >= 0,
            f"--validate-episodes must be an integer >= 0, got {self.validate_episodes!r}",
        )
        need(isinstance(self.obs_norm, bool), f"--obs-norm must be true or false, got {self.obs_norm!r}")
        need(
            integer(self.select_episodes) and self.select_episodes >= 0,
            f"--select-episodes must be an integer >= 0, got {self.select_episodes!r}",
        )
        _ = self.envs  # bad env_options are refused here, in one line
        from synapto.evolution.worker.fast_box2d import check_backend

        check_backend(self.env, self.envs)
        need(isinstance(self.strategy, str), f"--strategy must be a name, got {self.strategy!r}")
        need(isinstance(self.agent, str) and bool(self.agent), f"--agent must be a name, got {self.agent!r}")
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
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @property
    def options(self) -> dict[str, Any]:
        """The strategy's options completed with its defaults."""
        from synapto.evolution.strategies import strategy_class

        return strategy_class(self.strategy).check_options(self.strategy_options)

    @classmethod
    def from_toml(cls, path, **overrides) -> EvolveConfig:
        """The config of a TOML file, or of a shipped config by name (``"quickstart"``), read
        as ``evolve --config`` reads it; ``overrides`` (field values) win over the file.  The
        file's run keys (``workers``, ``out``, ``task_timeout``) are not part of a config."""
        from synapto.config import load_toml, one_seed
        from synapto.options import hidden_layers, strategy_options, table

        values = load_toml(path, EVOLVE_KEYS)
        for key in EVOLVE_RUN_KEYS:
            values.pop(key, None)
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
        data = json.loads(text)
        if "strategy" not in data and "mutation_std" in data:  # a run file of the GA-only format
            data["strategy_options"] = {"mutation_std": data.pop("mutation_std")}
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def differences(self, other: EvolveConfig, names=None) -> list[str]:
        """``name: ours -> theirs`` for every identity field that differs."""
        out = []
        for name in names or self.IDENTITY:
            a, b = getattr(self, name), getattr(other, name)
            if name == "strategy_options" and self.strategy == other.strategy:
                a, b = self.options, other.options  # defaults spelled out or not: the same run
            if a != b:
                out.append(f"{name}: {_show(a)} (run file) vs {_show(b)} (command line)")
        return out


def _show(v):
    return list(v) if isinstance(v, tuple) else v


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
            raise UsageError(f"--schedule must be 'dynamic' or 'waves', got {self.schedule!r}")
        if self.on_error not in ("abort", "skip"):
            raise UsageError(f"--on-error must be 'abort' or 'skip', got {self.on_error!r}")
        if self.checkpoint_every < 1:
            raise UsageError(f"--checkpoint-every must be >= 1, got {self.checkpoint_every}")
        if self.batch not in ("auto", "off"):
            raise UsageError(f"--batch must be 'auto' or 'off', got {self.batch!r}")
        if self.wire not in ("keys", "genomes"):
            raise UsageError(f"--wire must be 'keys' or 'genomes', got {self.wire!r}")
