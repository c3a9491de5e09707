"""Agents: neural-network genomes behind one small interface (see :mod:`agents.base`).

``--agent`` accepts a short name from :data:`BUILTIN` or ``package.module:Class``
for a user's own subclass of :class:`agents.base.Agent`.
"""

from __future__ import annotations

import importlib

from synapto.errors import UsageError

BUILTIN = {
    "pruned-mlp": "agents.pruned_mlp:PrunedMLP",
    "hebbian-dag": "agents.hebbian_dag:HebbianDAG",
}


def load_agent_class(spec: str):
    """The agent class named by ``spec`` (a short name or ``module:Class``)."""
    from agents.base import Agent

    target = BUILTIN.get(spec, spec)
    if ":" not in target:
        raise UsageError(
            f"--agent {spec!r} is unknown: expected one of {', '.join(BUILTIN)} or package.module:Class"
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UsageError(f"--agent {spec!r}: cannot import module {module_name!r} ({exc})") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(f"--agent {spec!r}: module {module_name!r} has no attribute {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise UsageError(f"--agent {spec!r}: {class_name} is not a subclass of agents.base.Agent")
    return cls
