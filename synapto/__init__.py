"""synapto: distributed, reproducible evolution of pruned and Hebbian networks.

The package layout mirrors the architecture:

- :mod:`synapto.seeding`     every seed the project uses
- :mod:`synapto.envs`        gymnasium environments and their checks
- :mod:`synapto.config`      frozen run configurations
- :mod:`synapto.parallel`    MPI launch and the task farm (shared with PPO)
- :mod:`synapto.evolution`   the generation loop, selection, evaluation
- :mod:`synapto.store`       HDF5 run files and checkpoints: the only package writing or reading them
- :mod:`synapto.replay`      re-running stored evaluations
- :mod:`synapto.cli`         the command line
"""

__version__ = "0.1.0"
