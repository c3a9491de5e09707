"""Evolution strategies behind one ask/tell seam (:mod:`.base`).

- ``ga`` (:mod:`.ga`): selection, recombination, pruning and weight mutation;
- ``openai-es`` (:mod:`.openai_es`), ``pgpe`` (:mod:`.pgpe`), ``cmaes`` (:mod:`.cmaes`):
  searches around a centre (:mod:`.es`), with the agent's pruning applied to the centre;
- ``ars`` (:mod:`.ars`): Augmented Random Search, a centre strategy on raw returns.

What they share: the seam and the steps of ``tell`` (:mod:`.base`), their options and
its checks (:mod:`.options`), the hall of fame (:mod:`.hall`), pruning to a connection
budget (:mod:`.prune`).
"""

from __future__ import annotations

import json

from synapto.evolution.strategies.base import STRATEGIES, Strategy, strategy_class


def make_strategy(cfg, agent, rng) -> Strategy:
    """The strategy of run config ``cfg`` for ``agent``, drawing from ``rng`` (not started)."""
    return strategy_class(cfg.strategy)(agent, cfg.population, cfg.strategy_options, rng)


def options_table(name: str) -> str:
    """The Markdown table of strategy ``name``'s options and defaults (docs/strategies.md holds them)."""
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    for key, opt in strategy_class(name).OPTIONS.items():
        rows.append(f"| `{key}` | `{json.dumps(opt.default)}` | {opt.help} |")
    return "\n".join(rows)


__all__ = ["STRATEGIES", "Strategy", "make_strategy", "options_table", "strategy_class"]
