"""A stored agent as a policy for your own loop: :func:`load_policy`.

    policy = synapto.load_policy("runs/quickstart.h5")        # the run's champion
    env = policy.make_env()
    obs, _ = env.reset(seed=int(policy.test_seeds[0]))
    policy.reset()
    while True:
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
        ...
    policy.to_onnx("champion.onnx")                            # for other tools (the onnx extra)

Evolution runs give a :class:`LoadedPolicy`, PPO runs a :class:`PPOPolicy` (its mean action,
the most likely choice for Discrete actions, as ``ppo-eval`` tests it); both have ``act``,
``reset``, ``end_episode``, ``make_env``, ``test_seeds``/``test_returns``, ``fitness`` with
``fitness_on`` naming that figure, ``to_onnx`` and ``to_npz`` (:mod:`synapto.policy_export`).

The policy acts exactly as in the run (the observation normalisation it ran with, the
flattening of image observations), so the champion's test episodes, replayed with
``test_seeds`` in fresh environments, give the stored test returns bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synapto.agents import build_agent
from synapto.agents.base import Agent
from synapto.agents.hebbian_dag import HebbianDAG
from synapto.agents.pruned_mlp import PrunedMLP
from synapto.common.errors import RunFileError, UsageError
from synapto.common.seeding import test_seeds
from synapto.envs import make_env, space_info
from synapto.evolution.config import EvolveConfig
from synapto.evolution.loop import restore_strategy
from synapto.evolution.obs_norm import CLIP as EVOLVED_CLIP
from synapto.evolution.worker.evaluate import acting
from synapto.policy_export import Layer, Network, write_npz, write_onnx
from synapto.ppo.config import PPOConfig
from synapto.ppo.normalise import CLIP as PPO_CLIP, normalise
from synapto.ppo.policy import Policy
from synapto.store import PPORun, RunData, read_checkpoint
from synapto.store.series import run_kind


class _Exportable:
    """``to_onnx`` and ``to_npz`` from :meth:`network`."""

    config: Any  #: the run's configuration (each subclass's own)

    def network(self):
        raise NotImplementedError

    def to_onnx(self, path: str | Path, obs_dtype: str = "float32") -> Path:
        """Write the policy as an ONNX model: raw observation in (``obs``, float32; ``obs_dtype="float64"``
        for a float64 input), :meth:`act`'s action out (:mod:`synapto.policy_export`)."""
        write_onnx(self.network(), path, obs_dtype)
        return Path(path)

    def to_npz(self, path: str | Path) -> Path:
        """Write the policy's named weight matrices and their layout (:mod:`synapto.policy_export`)."""
        write_npz(self.network(), path)
        return Path(path)

    def make_env(self, **kwargs):
        """A fresh environment of the run (its env options included; ``render_mode=...`` may be given)."""
        return make_env(self.config.env, **{**getattr(self.config, "make_kwargs", {}), **kwargs})

    @property
    def env_id(self) -> str:
        return self.config.env


@dataclass
class LoadedPolicy(_Exportable):
    """An agent of an evolution run file, ready to act: :meth:`act` maps a raw observation to an action."""

    config: Any  #: the run's EvolveConfig
    agent: Any
    genome: np.ndarray
    generation: int
    #: the figure the agent was chosen on, named by ``fitness_on``; a strategy's final centre
    #: (never evaluated in training or validation) gets its selection fitness, else its mean
    #: test return; NaN only for a centre neither selected nor tested
    fitness: float
    test_seeds: np.ndarray  #: the seeds of the champion's test episodes (empty for other agents)
    test_returns: np.ndarray  #: their stored returns
    obs_norm: tuple[np.ndarray, np.ndarray] | None
    description: str
    #: what ``fitness`` is: "training", "validation", "selection", "test" (mean return) or "none"
    fitness_on: str = "training"

    def __post_init__(self):
        self._policy = self.agent.policy(self.genome)
        self._act = acting(self.agent, self._policy, self.obs_norm)

    def reset(self) -> None:
        """Call at the start of every episode (a Hebbian agent's traces start afresh)."""
        self._policy.reset()

    def act(self, obs):
        """The action for the environment's raw observation ``obs``."""
        return self._act(obs)

    def end_episode(self) -> None:
        self._policy.end_episode()

    def network(self):
        """The agent as layers (:class:`synapto.policy_export.Network`): pruned-mlp and static hebbian-dag."""
        agent = self.agent
        if isinstance(agent, HebbianDAG) and agent.options["neuromodulate"]:
            raise UsageError(
                "a plastic hebbian-dag (neuromodulate = true) changes its weights every step; "
                "export takes pruned-mlp, static hebbian-dag and PPO policies"
            )
        if not isinstance(agent, (PrunedMLP, HebbianDAG)):
            raise UsageError(
                f"export takes pruned-mlp, static hebbian-dag and PPO policies, not agent {self.config.agent!r}"
            )
        layout = agent.layout()
        layers = []
        for target in range(1, len(layout.sizes)):
            blocks = sorted((b for b in layout.blocks if b.target == target), key=lambda b: b.source)
            weight = np.vstack([self.genome[b.index].reshape(b.shape) for b in blocks])
            last = target == len(layout.sizes) - 1
            layers.append(
                Layer(
                    weight,
                    None,
                    "previous" if [b.source for b in blocks] == [target - 1] else "all",
                    "identity" if last and isinstance(agent, PrunedMLP) else "tanh",
                )
            )
        space, bounds = agent.space, agent.action_bounds
        head = "argmax" if space.discrete else "tanh" if bounds is None else "tanh-scaled"
        return Network(
            space.obs_dim,
            space.act_dim,
            tuple(layers),
            head,
            "float64",
            self.obs_norm,
            EVOLVED_CLIP,
            1 if layout.modulation_unit else 0,
            None if bounds is None else (np.asarray(bounds[0], np.float64), np.asarray(bounds[1], np.float64)),
        )


@dataclass
class PPOPolicy(_Exportable):
    """The policy of a PPO run file: :meth:`act` gives its mean action (the most likely choice)."""

    config: Any  #: the run's PPOConfig
    params: np.ndarray  #: the policy's flat parameters (MLP, then log-std for Box actions)
    label: str  #: which parameters: "final", "epoch K", or the checkpoint's
    obs_dim: int
    act_dim: int
    discrete: bool
    obs_norm: tuple[np.ndarray, np.ndarray] | None
    test_seeds: np.ndarray  #: the final policy's test episodes (empty without a test)
    test_returns: np.ndarray
    fitness: float  #: the mean test return, else the last epoch's mean training return (``fitness_on``)
    fitness_on: str  #: "test" or "training"
    description: str

    def __post_init__(self):
        self._dtype = np.dtype(self.config.dtype)
        self._policy = Policy(
            self.obs_dim, self.act_dim, self.config.hid, self.discrete, np.asarray(self.params).astype(self._dtype)
        )

    def reset(self) -> None:
        """A PPO policy keeps no state between steps."""

    def end_episode(self) -> None:
        """A PPO policy keeps no state between steps."""

    def act(self, obs):
        x = np.ravel(obs) if self.obs_norm is None else normalise(np.ravel(obs), *self.obs_norm)
        return self._policy.mode(np.asarray(x).astype(self._dtype))

    def network(self):
        mlp = self._policy.mlp
        n = len(mlp.W)
        layers = tuple(
            Layer(np.array(w), np.array(b), "previous", "tanh" if i < n - 1 else "identity")
            for i, (w, b) in enumerate(zip(mlp.W, mlp.b))
        )
        return Network(
            self.obs_dim,
            self.act_dim,
            layers,
            "argmax" if self.discrete else "identity",
            self._dtype.name,
            self.obs_norm,
            PPO_CLIP,
        )


def load_policy(
    path: str | Path, generation: int | None = None, individual: int | None = None, params: str = "latest"
) -> LoadedPolicy | PPOPolicy:
    """The policy of run file ``path``.  An evolution run: its champion when finished (the best
    agent so far of an unfinished one), or its individual ``individual`` of generation
    ``generation`` (a :class:`LoadedPolicy`).  A PPO run: its ``params`` ("latest": the final
    parameters, else the last checkpoint's; "final"; or an epoch kept by ``save_freq``), a
    :class:`PPOPolicy`."""
    if run_kind(path) == "ppo":
        if generation is not None or individual is not None:
            raise UsageError("generation/individual are for evolution runs; a PPO run takes params=")
        return _load_ppo(Path(path), params)
    if params != "latest":
        raise UsageError("params= is for PPO runs; evolution runs take generation= and individual=")
    return _load_evolved(path, generation, individual)


def _load_evolved(path, generation, individual) -> LoadedPolicy:
    pick = pick_genome(path, generation, individual)
    returns = np.asarray(pick.test_returns, dtype=np.float64)
    seeds = np.asarray(test_seeds(pick.config.seed, returns.size), dtype=np.int64)
    fitness, on = pick.fitness, "validation" if pick.config.validate_episodes else "training"
    if generation is not None:
        on = "training"
    elif math.isnan(fitness):  # a strategy's final centre: never evaluated in training or validation
        with RunData(path, kind="evolve") as run:
            selected = run.champion().selection_fitness if run.tested else None
        if selected is not None and not math.isnan(selected):
            fitness, on = float(selected), "selection"
        elif returns.size:
            fitness, on = float(returns.mean()), "test"
        else:
            on = "none"
    return LoadedPolicy(
        pick.config, pick.agent, pick.genome, pick.generation, fitness, seeds, returns, pick.obs_norm, pick.what, on
    )


def _load_ppo(path: Path, which: str) -> PPOPolicy:
    with PPORun(path) as run:
        cfg = run.parse_config(PPOConfig.from_json)
        pi, _, label = run.params(which)
        dims = (run.obs_dim, run.act_dim, bool(run.discrete))
        norm = run.policy_norm(int(label.split()[1]) if label.startswith("epoch ") else run.completed - 1)
        test = run.policy_test() if label == "final" else None
        last_return = float(run.stats("AverageEpRet")[-1]) if run.completed else math.nan
    if not np.all(np.isfinite(pi)):
        raise RunFileError(f"{str(path)!r}: the {label} parameters are not written (NaN)")
    info = space_info(cfg.env)
    if (info.obs_dim, info.act_dim, info.discrete) != dims:
        raise RunFileError(f"{str(path)!r}: the run's spaces {dims} do not match {cfg.env}'s")
    seeds = np.zeros(0, np.int64) if test is None else np.asarray(test["seeds"], np.int64)
    returns = np.zeros(0) if test is None else np.asarray(test["returns"], np.float64)
    fitness, on = (float(returns.mean()), "test") if returns.size else (last_return, "training")
    return PPOPolicy(
        cfg, pi, label, *dims, norm, seeds, returns, fitness, on, f"PPO {list(cfg.hid)}, parameters {label}"
    )


# ------------------------------------------------------------------------- picking a genome
@dataclass
class Pick:
    """A genome chosen from an evolution run, with the agent that runs it."""

    config: EvolveConfig
    agent: Agent
    genome: np.ndarray
    generation: int
    individual: int | None  #: None for the champion of a finished run
    fitness: float
    what: str  #: e.g. "champion of generation 12 (fitness 253.10)"
    test_returns: np.ndarray  #: the run's stored test returns of this genome (champion only)
    label: str = ""  #: short: "champion of gen 12", "best so far (gen 7)", "gen 3 individual 5"
    obs_norm: tuple | None = None  #: the observation normalisation the genome runs with

    def act(self, policy):
        """``policy``'s action for a raw observation (flattened, normalised as in the run)."""
        return acting(self.agent, policy, self.obs_norm)


def fitness_words(fitness: float) -> str:
    """``fitness 12.30``, or what a NaN fitness means (a strategy's final centre, never evaluated)."""
    if np.isnan(fitness):
        return "not evaluated: a final centre"
    return f"fitness {fitness:.2f}"


def pick_genome(path: str | Path, generation: int | None = None, individual: int | None = None) -> Pick:
    """The champion of a finished run (else the best individual so far), or ``--generation G
    --individual I``; with the agent built from the run's config."""
    path = Path(path)
    if (generation is None) != (individual is None):
        raise UsageError("give both --generation G and --individual I, or neither (the champion)")
    with RunData(path, kind="evolve") as run:
        cfg = EvolveConfig.from_json(run.config_json)
        agent = build_agent(cfg)
        if generation is not None and individual is not None:
            found = _pick_individual(run, path, cfg, agent, generation, individual)
        elif run.tested:
            found = _pick_champion(run, cfg, agent)
        else:
            found = _pick_best_so_far(run, path, cfg, agent)
    found.genome = np.asarray(found.genome, dtype=np.float64)
    if found.genome.shape != (agent.n_params,):
        raise RunFileError(
            f"{str(path)!r}: genome of length {found.genome.shape[0]} does not fit agent "
            f"{cfg.agent} {list(cfg.hidden)} on {cfg.env} ({agent.n_params} parameters)"
        )
    return found


def _pick_individual(run, path: Path, cfg, agent, generation: int, individual: int) -> Pick:
    """``--generation G --individual I``, its range checked."""
    done = run.completed
    if not 0 <= generation < done:
        raise UsageError(
            f"--generation {generation} is out of range: {str(path)!r} has "
            f"{done} completed generation(s) (0..{done - 1})"
        )
    if not 0 <= individual < cfg.population:
        raise UsageError(
            f"--individual {individual} is out of range: population {cfg.population} (0..{cfg.population - 1})"
        )
    fitness = float(run.fitness(generation, individual))
    what = f"generation {generation} individual {individual} ({fitness_words(fitness)})"
    return Pick(
        cfg, agent, run.population(generation, individual), generation, individual, fitness, what,
        np.zeros(0), f"gen {generation} individual {individual}", run.obs_norm(generation),
    )  # fmt: skip


def _pick_champion(run, cfg, agent) -> Pick:
    """The tested champion of a finished run."""
    done, champion = run.completed, run.champion()
    generation, fitness, test_returns = champion.generation, champion.fitness, champion.test_returns
    tested_on = f", test {test_returns.mean():.1f} over {test_returns.size} episodes" if test_returns.size else ""
    if generation >= done:  # a strategy's final centre: the run's last generation made it
        what = f"champion: the final centre after generation {done - 1} ({fitness_words(fitness)}{tested_on})"
        label = f"final centre after gen {done - 1}"
    else:
        what = f"champion of generation {generation} ({fitness_words(fitness)}{tested_on})"
        label = f"champion of gen {generation}"
    returns = np.asarray(test_returns)
    return Pick(cfg, agent, champion.genome, generation, None, fitness, what, returns, label, champion.obs_norm)


def _pick_best_so_far(run, path: Path, cfg, agent) -> Pick:
    """An unfinished run's best agent: its strategy's own best-ever (from the checkpoint), else
    the individual of the best training fitness."""
    done = run.completed
    if done < 1:
        raise RunFileError(f"{str(path)!r} has no completed generation yet")
    unfinished = "the run is unfinished, no tested champion"
    best = _checkpoint_best(path, cfg)
    if best is not None and best[2] < done:  # an ES centre not evaluated yet has no normalisation to show
        genome, fitness, generation = best
        individual = None
        what = f"best so far: from generation {generation} ({fitness_words(fitness)}; {unfinished})"
    else:
        fit = np.asarray(run.fitness(), dtype=np.float64)
        fit = np.where(np.isnan(fit), -np.inf, fit)
        generation, individual = (int(v) for v in np.unravel_index(int(np.argmax(fit)), fit.shape))
        genome, fitness = run.population(generation, individual), float(fit[generation, individual])
        what = f"best so far: generation {generation} individual {individual} ({fitness_words(fitness)}; {unfinished})"
    label = f"best so far (gen {generation})"
    norm = run.obs_norm(generation)
    return Pick(cfg, agent, genome, generation, individual, fitness, what, np.zeros(0), label, norm)


def _checkpoint_best(path: Path, cfg):
    """``(genome, fitness, generation)`` of the strategy's champion in the run's checkpoint, or None."""
    try:
        found = read_checkpoint(path)
        if found is None:
            return None
        champion = restore_strategy(cfg, found).champion
        genome = np.asarray(champion.genome, dtype=np.float64)
        if genome.ndim != 1 or not np.isfinite(champion.fitness):
            return None
        return genome, float(champion.fitness), int(champion.generation)
    except Exception:  # no usable checkpoint: fall back to the best training fitness
        return None
