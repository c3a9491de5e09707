"""synapto from Python: run an evolution from a config object, or drive a strategy with
your own evaluation loop (ask / tell).  Everything here is importable as ``synapto.X``.

    import synapto
    cfg = synapto.EvolveConfig(env="CartPole-v1", agent="pruned-mlp", hidden=(8,), population=16,
                               generations=5, strategy="openai-es")
    summary = synapto.evolve(cfg, "runs/cartpole.h5")          # the same run as the CLI's

    search = synapto.AskTell(synapto.build_agent(cfg), "openai-es", population=16, seed=0)
    for _ in range(5):
        genomes = search.ask()
        search.tell([my_fitness(x) for x in genomes])
    search.champion.genome
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from synapto import seeding
from synapto.agents import build_agent
from synapto.config import EvolveConfig
from synapto.errors import UsageError
from synapto.evolution.evaluate import EvalResult, evaluate
from synapto.evolution.loop import RunOptions, RunSummary, run_evolution
from synapto.evolution.strategies import strategy_class
from synapto.evolution.strategies.base import Candidates, Champion, Feedback, Strategy


def evolve(config: EvolveConfig, out: str | Path, workers: int = 0, force: bool = False,
           resume: bool = False, options: RunOptions = RunOptions(),
           log: Callable[[str], None] = print) -> RunSummary | None:
    """Run ``config`` into the run file ``out``, exactly as ``python -m synapto evolve``
    does (the run file is bit-identical to the command line's).

    ``workers=0`` evaluates in this process; ``workers=N`` starts ``mpiexec -n N+1`` (the
    coordinator and N workers) as a child process and waits for it (its output goes to
    this process's stdout); the summary is then read back from the run file.
    """
    from synapto.store import check_output_path

    from synapto.resources import check_memory, evolve_memory

    out = Path(out)
    check_memory(evolve_memory(config.population, build_agent(config).n_params, config.episodes),
                 f"a population of {config.population:,} genomes")
    if not resume:
        check_output_path(out, force)
    if workers:
        return _evolve_mpi(config, out, workers, force, resume, options)
    from synapto.parallel.farm import SerialFarm

    return run_evolution(config, out, SerialFarm(), log=log, options=options, resume=resume,
                         overwrite=force or resume)


def _evolve_mpi(config, out, workers, force, resume, options) -> None:
    from synapto.parallel.launch import find_mpiexec, without_mpi_env

    if not isinstance(workers, int) or workers < 0:
        raise UsageError(f"workers must be an integer >= 0, got {workers!r}")
    args = json.dumps({"config": config.to_json(), "out": str(out), "resume": resume, "force": force,
                       "options": options.__dict__})
    cmd = [find_mpiexec(), "-n", str(workers + 1), sys.executable, "-c",
           "import sys, synapto.api as a; a._mpi_main(sys.argv[1])", args]
    env = {**without_mpi_env(), "SYNAPTO_LAUNCHED": "1"}
    rc = subprocess.run(cmd, env=env).returncode
    if rc != 0:
        raise RuntimeError(f"the MPI run exited with code {rc} (see its output above)")
    return None


def _mpi_main(args_json: str) -> None:
    """Entry point of every rank of :func:`evolve`'s MPI child."""
    from synapto.parallel.farm import make_farm

    args = json.loads(args_json)
    farm, coordinator = make_farm()
    if not coordinator:
        return
    try:
        run_evolution(EvolveConfig.from_json(args["config"]), Path(args["out"]), farm,
                      options=RunOptions(**args["options"]), resume=args["resume"],
                      overwrite=args.get("force", True) or args["resume"])
    finally:
        farm.close()


def rollout(agent, genome: np.ndarray, env: str, seeds: Sequence[int],
            obs_norm: tuple[np.ndarray, np.ndarray] | None = None) -> EvalResult:
    """Episodes of ``genome`` on ``env``, one per seed, each in a fresh environment reset
    with that seed (the evaluation ``synapto evolve`` runs): returns, steps, fitness
    (mean return minus the agent's penalty) and the trace statistics."""
    from functools import partial

    from synapto.envs import make_env

    return evaluate(agent, partial(make_env, env), np.asarray(genome, dtype=np.float64),
                    np.asarray(seeds, dtype=np.int64), obs_norm=obs_norm)


class AskTell:
    """A strategy for your own evaluation loop: ``ask()`` genomes, ``tell(fitness)``.

    ``strategy`` is a ``--strategy`` name; ``options`` its options (``sigma=0.1``...);
    every random number comes from the seed's EVOLVE stream, so the same calls give the
    same genomes.  :meth:`state` / :meth:`from_state` checkpoint it exactly.
    """

    def __init__(self, agent, strategy: str = "openai-es", population: int = 64, seed: int = 0,
                 **options: Any):
        cls = strategy_class(strategy)
        opts = cls.check_options(options)
        cls.check_population(population, opts)
        self.agent = agent
        self.generation = 0
        self.strategy: Strategy = cls(agent, population, options,
                                      seeding.generator(seed, seeding.Stream.EVOLVE))
        self.strategy.start()

    def ask(self) -> np.ndarray:
        """The genomes to evaluate now, (population, n_params) (a copy: yours to change)."""
        return np.array(self.strategy.ask())

    def tell(self, fitness: Sequence[float], stats: np.ndarray | None = None) -> None:
        """The fitness of each asked genome (higher is better; -inf for a failed one) and,
        optionally, per-connection trace statistics (hebbian-dag's pruning uses them)."""
        genomes = self.strategy.ask()
        fitness = np.asarray(fitness, dtype=np.float64)
        if fitness.shape != (genomes.shape[0],):
            raise UsageError(f"tell needs one fitness per asked genome ({genomes.shape[0]}), "
                             f"got shape {fitness.shape}")
        stats = np.zeros_like(genomes) if stats is None else np.asarray(stats, dtype=np.float64)
        connections = np.count_nonzero(genomes, axis=1)
        none = Candidates(np.zeros(0, np.int64), np.zeros((0, genomes.shape[1])))
        self.strategy.tell(Feedback(self.generation, np.where(np.isnan(fitness), -np.inf, fitness), stats,
                                    connections, none, np.zeros(0)))
        self.generation += 1

    @property
    def champion(self) -> Champion:
        """The best genome told so far, its fitness and generation."""
        return self.strategy.champion

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly: arrays, scalars, the Generator's state."""
        arrays, scalars = self.strategy.state()
        return {"arrays": arrays, "scalars": {**scalars, "generation": self.generation},
                "rng": self.strategy.rng.bit_generator.state}

    @classmethod
    def from_state(cls, state: dict[str, Any], agent, strategy: str, population: int,
                   **options: Any) -> "AskTell":
        """The search of :meth:`state`, continued."""
        self = cls.__new__(cls)
        self.agent = agent
        self.generation = int(state["scalars"]["generation"])
        bitgen = getattr(np.random, state["rng"]["bit_generator"])()
        bitgen.state = state["rng"]
        self.strategy = strategy_class(strategy)(agent, population, options, np.random.Generator(bitgen))
        self.strategy.restore(state["arrays"], state["scalars"])
        return self


__all__ = ["AskTell", "EvolveConfig", "RunOptions", "RunSummary", "build_agent", "evolve", "rollout"]
