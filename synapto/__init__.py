"""synapto: distributed, reproducible evolution of pruned and Hebbian networks.

From Python (:mod:`synapto.api`)::

    import synapto
    summary = synapto.evolve(synapto.EvolveConfig(env="CartPole-v1", strategy="openai-es"), "runs/a.h5")
    search = synapto.AskTell(agent, "pgpe", population=32)   # your own evaluation loop

The package layout mirrors the architecture (each seam has one owner):

- :mod:`synapto.cli`          the command line (the only module reading argv)
- :mod:`synapto.resources`    memory and run-file checks made before a run starts
- :mod:`synapto.common.folders`      output folders checked before anything is written
- :mod:`synapto.api`          the Python API (evolve, AskTell, rollout)
- :mod:`synapto.common.config`       TOML config files (evolve's and ppo's), shipped configs by name
- :mod:`synapto.common.options`      values of KEY=VALUE options and TOML tables
- :mod:`synapto.common.seeding`      every seed the project uses
- :mod:`synapto.envs`         gymnasium environments and their checks
- :mod:`synapto.agents`       networks behind the Agent interface (pruned-mlp, hebbian-dag, batched policies)
- :mod:`synapto.evolution`    evolution's config, command (checks, farm, stop reports, resume), generation
                              loop, strategies (ask/tell), rollouts, batched evaluation, replay
- :mod:`synapto.parallel`     MPI launch, the task farm, stop signals, PPO's collectives (the only users of mpi4py)
- :mod:`synapto.store`        HDF5 run files and checkpoints: the only package writing or reading them
- :mod:`synapto.ppo`          the PPO baseline
- :mod:`synapto.bench`        benchmarks
- :mod:`synapto.tracking`     experiment tracking, shared by evolution and PPO (callbacks, TensorBoard, live logs)
- :mod:`synapto.viz`          plot, render, draw, export
- :mod:`synapto.common.noise`        noise keys: a centre strategy's samples rebuilt from a few integers
- :mod:`synapto.common.faults`, :mod:`synapto.common.errors`, :mod:`synapto.common.fastmath`, :mod:`synapto.common.blas`
"""

__version__ = "0.1.0"

#: the public names: those of :mod:`synapto.api` are served as ``synapto.<name>`` on first use,
#: so that ``import synapto`` stays quick (numpy, gymnasium and the strategies load with the first)
__all__ = [
    "AskTell",
    "EvolveConfig",
    "RunOptions",
    "RunSummary",
    "StopRun",
    "__version__",
    "build_agent",
    "evolve",
    "load_policy",
    "rollout",
]
_API = tuple(name for name in __all__ if name != "__version__")

#: true for type checkers (mypy and pyright read any ``TYPE_CHECKING`` so), false when run: importing
#: typing would cost ``import synapto`` more than all the rest of it
TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, with their types
    from synapto.api import (
        AskTell,
        EvolveConfig,
        RunOptions,
        RunSummary,
        StopRun,
        build_agent,
        evolve,
        load_policy,
        rollout,
    )


def __getattr__(name: str):
    if name in _API:
        from synapto import api

        return getattr(api, name)
    raise AttributeError(f"module 'synapto' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
