"""The base config of a study, and a trial's config: the base with sampled values.

A base config is an ``evolve`` TOML (a file or a shipped config's name).  Its values are
read as ``evolve --config`` reads them (:func:`synapto.evolution.config.run_values`):
the strategy's shorthands (``sigma``, ``lr``, ``prune``, ``mutation_std``) go into
``strategy_options``.  A sampled value named ``strategy_options.KEY``,
``agent_options.KEY`` or ``env_options.KEY`` sets that table's option; any other name sets
the run option itself.  Trials never run the test stream: their ``test_episodes`` is 0.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from synapto.agents import build_agent
from synapto.common.errors import UsageError
from synapto.common.options import hidden_layers
from synapto.evolution.command import check_evolve_memory
from synapto.evolution.config import EVOLVE_KEYS, EvolveConfig, file_values, resolve_population, run_values
from synapto.evolution.run_options import STRATEGY_SHORTHANDS
from synapto.evolution.strategies import make_strategy
from synapto.ppo.config import load_ppo_toml

#: the option tables a sampled name may reach into (``strategy_options.init_std``)
TABLES = ("strategy_options", "agent_options", "env_options")
#: options a study never samples: which seeds run, where, and the test that must stay unseen
NOT_TUNED = ("seed", "out", "workers", "task_timeout", "test_episodes", "population_per_worker")


def tunable_names() -> list[str]:
    """The run options a space may name directly (the rest through :data:`TABLES`)."""
    return sorted(set(EVOLVE_KEYS) - set(NOT_TUNED) - set(TABLES))


def load_base(path) -> dict[str, Any]:
    """The values of the base config ``path`` (evolve's TOML keys, tables normalised); its
    ``seed``, ``out`` and ``workers`` are dropped (the study chooses them)."""
    try:
        values = run_values(file_values(path))  # the keys it leaves out: the default experiment's
    except UsageError:
        if _is_ppo(path):
            raise UsageError(f"--config {str(path)!r} is a PPO config: tune searches evolve configs only") from None
        raise
    resolve_population(values, values.get("workers", 0))  # as EvolveConfig.from_toml resolves it
    for key in ("seed", "out", "workers", "task_timeout"):
        values.pop(key, None)
    for key in TABLES:
        values.setdefault(key, {})
    return values


def _is_ppo(path) -> bool:
    try:
        load_ppo_toml(path)
    except UsageError:
        return False
    return True


def with_params(base: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with each sampled ``name = value`` of ``params`` set."""
    values = copy.deepcopy(dict(base))
    if "population" in params:  # a sampled population is given as such
        values.pop("population_per_worker", None)
    for name, value in params.items():
        table, dot, key = name.partition(".")
        if dot:
            values[table][key] = value
        elif name in STRATEGY_SHORTHANDS:
            values["strategy_options"][name] = value
        else:
            values[name] = value
    if "prune" in values["strategy_options"] and isinstance(values["strategy_options"]["prune"], str):
        values["strategy_options"]["prune"] = values["strategy_options"]["prune"].lower() == "on"
    return values


def trial_config(values: Mapping[str, Any], seed: int):
    """The :class:`EvolveConfig` a trial runs on tuning seed ``seed`` (no test episodes)."""
    try:
        return EvolveConfig(
            **{**values, "hidden": hidden_layers(values.get("hidden", (8, 8))), "seed": seed, "test_episodes": 0}
        )
    except TypeError as exc:
        raise UsageError(f"bad option value: {exc}") from None


def checked_config(values: Mapping[str, Any], seed: int):
    """:func:`trial_config`, checked as ``evolve`` checks a run before it starts (the agent
    and strategy built, the population's memory): a :class:`UsageError` names what is wrong."""
    cfg = trial_config(values, seed)
    agent = build_agent(cfg)
    check_evolve_memory([cfg], agent.n_params)
    make_strategy(cfg, agent, np.random.default_rng(0))
    return cfg
