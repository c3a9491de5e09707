"""Agents: neural-network genomes behind one small interface (see :mod:`synapto.agents.base`).

``--agent`` accepts a short name from :data:`BUILTIN` or ``package.module:Class``
for a user's own subclass of :class:`synapto.agents.base.Agent`.
"""

from __future__ import annotations

import importlib

from synapto.agents.base import Agent
from synapto.common.errors import UsageError, option_value
from synapto.envs import space_info

BUILTIN = {
    "pruned-mlp": "synapto.agents.pruned_mlp:PrunedMLP",
    "hebbian-dag": "synapto.agents.hebbian_dag:HebbianDAG",
}


def load_agent_class(spec: str):
    """The agent class named by ``spec`` (a short name or ``module:Class``)."""
    target = BUILTIN.get(spec, spec)
    if ":" not in target:
        raise UsageError(
            f"{option_value('agent', spec)} is unknown: expected one of {', '.join(BUILTIN)} or package.module:Class"
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UsageError(f"{option_value('agent', spec)}: cannot import module {module_name!r} ({exc})") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(f"{option_value('agent', spec)}: module {module_name!r} has no attribute {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise UsageError(f"{option_value('agent', spec)}: {class_name} is not a subclass of synapto.agents.base.Agent")
    return cls


def build_agent(cfg, space=None) -> Agent:
    """The agent of ``cfg`` -- anything with ``env``, ``agent``, ``hidden`` and
    ``agent_options`` (an :class:`~synapto.evolution.config.EvolveConfig`, the workers'
    :class:`~synapto.evolution.worker.spec.EvolveSpec`) -- for the environment's ``space``
    (a :class:`~synapto.envs.SpaceInfo`; default: read off a fresh env of ``cfg.env``).

    The one place agents are constructed.  A class that cannot be instantiated
    (abstract) or whose constructor raises is refused with one line."""
    cls = load_agent_class(cfg.agent)
    if space is None:
        space = space_info(cfg.env, getattr(cfg, "make_kwargs", None))
    if getattr(cls, "__abstractmethods__", None):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise UsageError(
            f"{option_value('agent', cfg.agent)}: {cls.__name__} is abstract (it does not implement {missing})"
        )
    try:
        agent = cls(space, tuple(cfg.hidden), dict(cfg.agent_options))
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(
            f"{option_value('agent', cfg.agent)}: constructing {cls.__name__} raised {type(exc).__name__}: {exc}"
        ) from None
    assert isinstance(agent, Agent)
    return agent
