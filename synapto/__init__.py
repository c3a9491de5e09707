"""synapto: distributed, reproducible evolution of pruned and Hebbian networks.

From Python (:mod:`synapto.api`)::

    import synapto
    summary = synapto.evolve(synapto.EvolveConfig(env="CartPole-v1", strategy="openai-es"), "runs/a.h5")
    search = synapto.AskTell(agent, "pgpe", population=32)   # your own evaluation loop

The package layout mirrors the architecture (each seam has one owner):

- :mod:`synapto.cli`          the command line (the only module reading argv)
- :mod:`synapto.evolve_command` what evolve does once its options are read (farm, stops, resume checks)
- :mod:`synapto.resources`    memory and output checks made before a run starts
- :mod:`synapto.api`          the Python API (evolve, AskTell, rollout)
- :mod:`synapto.config`       frozen run configurations, TOML loading
- :mod:`synapto.seeding`      every seed the project uses
- :mod:`synapto.envs`         gymnasium environments and their checks
- :mod:`synapto.agents`       networks behind the Agent interface (pruned-mlp, hebbian-dag, batched policies)
- :mod:`synapto.evolution`    the generation loop, the strategies (ask/tell), rollouts, batched evaluation
- :mod:`synapto.parallel`     MPI launch, the task farm, PPO's collectives (the only users of mpi4py)
- :mod:`synapto.store`        HDF5 run files and checkpoints: the only package writing or reading them
- :mod:`synapto.replay`       re-running stored evaluations
- :mod:`synapto.ppo`          the PPO baseline
- :mod:`synapto.bench`        benchmarks
- :mod:`synapto.viz`          plot, render, draw, export
- :mod:`synapto.stopping`, :mod:`synapto.faults`, :mod:`synapto.errors`, :mod:`synapto.fastmath`
"""

__version__ = "0.1.0"

#: names of :mod:`synapto.api` available as ``synapto.<name>`` (imported on first use)
_API = ("AskTell", "EvolveConfig", "RunOptions", "RunSummary", "build_agent", "evolve", "load_policy", "rollout")


def __getattr__(name: str):
    if name in _API:
        from synapto import api

        return getattr(api, name)
    raise AttributeError(f"module 'synapto' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
