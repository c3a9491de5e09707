"""The default experiment: what ``synapto evolve`` runs when it is given no run options.

``python -m synapto evolve`` runs :data:`PATH`, the best synaptolytic setting found for
the default agent (hebbian-dag): see ``docs/sparsity.md``.  Options given on the command
line change it (``--generations 2`` runs two generations of it; ``--env CartPole-v1``
runs it on CartPole); a ``--strategy`` other than its own drops its strategy options,
which are that strategy's.  The command line's ``--help`` shows its values as the
defaults.  There is one set of defaults: a ``--config FILE`` changes the default experiment
as options do (:func:`with_defaults`: the keys it leaves out take its values), and
:class:`synapto.evolution.config.EvolveConfig`'s defaults are its values (a test keeps them
equal).  The reference algorithm is ``--config experiments/lunarlander_reference.toml``
(LunarLander-v3) or ``experiments/bipedal_hebbian_dag.toml`` (the origin benchmark).

Before it starts, the command says what it runs and how long it expects to take:
:func:`expected_seconds`, from the env steps the experiment may take and the CPU time
one env step of it costs (:data:`CPU_SECONDS_PER_STEP`, measured).
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from pathlib import Path

#: the default experiment's config (a TOML file like those in ``experiments/``)
PATH = Path(__file__).with_name("defaults.toml")

#: CPU seconds per env step of the default experiment, everything included (policy,
#: environment, CMA-ES): one process (``--workers 0``) took 146.7 s of CPU for the
#: 2.79 M env steps of a whole run (tuning seed 1000) with the network cut to 25 %; cut
#: to 50 % (as now), it took 4 % more CPU than that over 400 k steps, run one after the other
CPU_SECONDS_PER_STEP = 53e-6
#: env steps of a final-selection or test episode (LunarLander-v3 champions land in about 300)
EPISODE_STEPS = 300


def values(allowed: AbstractSet[str]) -> dict:
    """The default experiment's options, as a config file's (keys with underscores)."""
    from synapto.config import load_toml

    return load_toml(PATH, allowed)


def with_defaults(given: dict, allowed: AbstractSet[str], strategy=None) -> dict:
    """A config file's values ``given`` (keys with underscores) over the default experiment's,
    as options given on the command line change it: a key left out takes its value; a strategy
    other than its own (``strategy``, the command line's, else the file's) drops its strategy
    options, which are its strategy's; strategy options given in a ``[strategy_options]`` table
    are laid over them (the shorthands ``sigma``, ``lr`` ... stay keys of their own, laid over
    them later, as the command line's)."""
    from synapto.options import table

    base = values(allowed)
    own = table(base, "strategy_options")
    if (strategy or given.get("strategy", base["strategy"])) != base["strategy"]:
        own = {}
    out = {**base, **given}
    theirs = table(out, "strategy_options")
    if own or theirs:
        out["strategy_options"] = {**own, **theirs}
    return out


def estimate(cfg, workers: int) -> str:
    """The time a run of ``cfg`` should take, with the cores it assumes (``--check``)."""
    minutes = math.ceil(expected_seconds(cfg, workers) / 60)
    return (
        f"expect about {minutes} min with {max(workers, 1)} core(s) to itself (at the default experiment's "
        f"{CPU_SECONDS_PER_STEP * 1e6:.0f} us of CPU per env step)"
    )


def expected_seconds(cfg, workers: int) -> float:
    """Wall-clock seconds the run of ``cfg`` should take on ``workers`` idle cores (0: one
    process): its env-step budget -- or, when fewer, its generations' episodes of
    :data:`EPISODE_STEPS` steps each -- plus the final selection (at most 5 candidates) and test."""
    per_generation = (cfg.population * cfg.episodes + cfg.validation_count * cfg.validate_episodes) * EPISODE_STEPS
    steps = cfg.generations * per_generation
    if cfg.max_env_steps:
        steps = min(steps, cfg.max_env_steps)
    steps += (cfg.select_episodes * 5 + cfg.test_episodes) * EPISODE_STEPS
    return steps * CPU_SECONDS_PER_STEP / max(workers, 1)


def describe(cfg, workers: int) -> str:
    """One line: the default experiment and the time it expects to take."""
    minutes = expected_seconds(cfg, workers) / 60
    prune = cfg.options.get("prune_to", 0)
    what = f"pruned to {prune:.0%} of its connections" if prune else "dense"
    return (
        f"no run options: the default experiment ({PATH.name}): {cfg.strategy} on {cfg.env}, {cfg.agent} "
        f"{list(cfg.hidden)} {what}, at most {cfg.max_env_steps / 1e6:g} M env steps; expect about "
        f"{math.ceil(minutes)} min with {max(workers, 1)} core(s) to itself "
        f"(--workers N for more; run options change it, --config FILE runs another experiment)"
    )
