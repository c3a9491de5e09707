"""Evolution strategies behind one ask/tell seam (:mod:`.base`).

- ``ga`` (:mod:`.ga`): selection, recombination, pruning and weight mutation.
"""

from __future__ import annotations

from synapto.evolution.strategies.base import STRATEGIES, Strategy, strategy_class


def make_strategy(cfg, agent, rng) -> Strategy:
    """The strategy of run config ``cfg`` for ``agent``, drawing from ``rng`` (not started)."""
    return strategy_class(cfg.strategy)(agent, cfg.population, cfg.strategy_options, rng)


__all__ = ["STRATEGIES", "Strategy", "make_strategy", "strategy_class"]
