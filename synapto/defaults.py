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

Before it starts, the command says what it runs and how long it expects to take
(:func:`synapto.common.estimate.expected_seconds`, from the env steps the experiment may take and
the CPU time one env step of it costs, measured).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from pathlib import Path

from synapto.common.config import load_toml
from synapto.common.estimate import estimate, expect, expected_seconds
from synapto.common.options import table

__all__ = ["PATH", "describe", "estimate", "expected_seconds", "values"]

#: the default experiment's config (a TOML file like those in ``experiments/``)
PATH = Path(__file__).with_name("defaults.toml")


def values(allowed: AbstractSet[str]) -> dict:
    """The default experiment's options, as a config file's (keys with underscores)."""
    return load_toml(PATH, allowed)


def with_defaults(given: dict, allowed: AbstractSet[str], strategy=None) -> dict:
    """A config file's values ``given`` (keys with underscores) over the default experiment's,
    as options given on the command line change it: a key left out takes its value; a strategy
    other than its own (``strategy``, the command line's, else the file's) drops its strategy
    options, which are its strategy's; strategy options given in a ``[strategy_options]`` table
    are laid over them (the shorthands ``sigma``, ``lr`` ... stay keys of their own, laid over
    them later, as the command line's)."""
    base = values(allowed)
    own = table(base, "strategy_options")
    if (strategy or given.get("strategy", base["strategy"])) != base["strategy"]:
        own = {}
    out = {**base, **given}
    theirs = table(out, "strategy_options")
    if own or theirs:
        out["strategy_options"] = {**own, **theirs}
    return out


def describe(cfg, workers: int) -> str:
    """One line: the default experiment and the time it expects to take."""
    prune = cfg.options.get("prune_to", 0)
    what = f"pruned to {prune:.0%} of its connections" if prune else "dense"
    return (
        f"no run options: the default experiment ({PATH.name}): {cfg.strategy} on {cfg.env}, {cfg.agent} "
        f"{list(cfg.hidden)} {what}, at most {cfg.max_env_steps / 1e6:g} M env steps; "
        f"{expect(expected_seconds(cfg, workers))} with {max(workers, 1)} core(s) to itself "
        f"(--workers N for more; run options change it, --config FILE runs another experiment)"
    )
