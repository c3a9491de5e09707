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

from synapto.errors import UsageError


class _Exportable:
    """``to_onnx`` and ``to_npz`` from :meth:`network`."""

    config: Any  #: the run's configuration (each subclass's own)

    def network(self):
        raise NotImplementedError

    def to_onnx(self, path: str | Path, obs_dtype: str = "float32") -> Path:
        """Write the policy as an ONNX model: raw observation in (``obs``, float32; ``obs_dtype="float64"``
        for a float64 input), :meth:`act`'s action out (:mod:`synapto.policy_export`)."""
        from synapto.policy_export import write_onnx

        write_onnx(self.network(), path, obs_dtype)
        return Path(path)

    def to_npz(self, path: str | Path) -> Path:
        """Write the policy's named weight matrices and their layout (:mod:`synapto.policy_export`)."""
        from synapto.policy_export import write_npz

        write_npz(self.network(), path)
        return Path(path)

    def make_env(self, **kwargs):
        """A fresh environment of the run (its env options included; ``render_mode=...`` may be given)."""
        from synapto.envs import make_env

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
        from synapto.evolution.worker.evaluate import acting

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
        from synapto.agents.hebbian_dag import HebbianDAG
        from synapto.agents.pruned_mlp import PrunedMLP
        from synapto.evolution.obs_norm import CLIP
        from synapto.policy_export import Layer, Network

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
            CLIP,
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
        from synapto.ppo.policy import Policy

        self._dtype = np.dtype(self.config.dtype)
        self._policy = Policy(
            self.obs_dim, self.act_dim, self.config.hid, self.discrete, np.asarray(self.params).astype(self._dtype)
        )

    def reset(self) -> None:
        """A PPO policy keeps no state between steps."""

    def end_episode(self) -> None:
        """A PPO policy keeps no state between steps."""

    def act(self, obs):
        from synapto.ppo.normalise import normalise

        x = np.ravel(obs) if self.obs_norm is None else normalise(np.ravel(obs), *self.obs_norm)
        return self._policy.mode(np.asarray(x).astype(self._dtype))

    def network(self):
        from synapto.policy_export import Layer, Network
        from synapto.ppo.normalise import CLIP

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
            CLIP,
        )


def load_policy(
    path: str | Path, generation: int | None = None, individual: int | None = None, params: str = "latest"
) -> LoadedPolicy | PPOPolicy:
    """The policy of run file ``path``.  An evolution run: its champion when finished (the best
    agent so far of an unfinished one), or its individual ``individual`` of generation
    ``generation`` (a :class:`LoadedPolicy`).  A PPO run: its ``params`` ("latest": the final
    parameters, else the last checkpoint's; "final"; or an epoch kept by ``save_freq``), a
    :class:`PPOPolicy`."""
    from synapto.viz import run_kind

    if run_kind(path) == "ppo":
        if generation is not None or individual is not None:
            raise UsageError("generation/individual are for evolution runs; a PPO run takes params=")
        return _load_ppo(Path(path), params)
    if params != "latest":
        raise UsageError("params= is for PPO runs; evolution runs take generation= and individual=")
    return _load_evolved(path, generation, individual)


def _load_evolved(path, generation, individual) -> LoadedPolicy:
    from synapto.seeding import test_seeds
    from synapto.store import RunData
    from synapto.viz import pick_genome

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
    from synapto.envs import space_info
    from synapto.errors import RunFileError
    from synapto.ppo.config import PPOConfig
    from synapto.store import PPORun

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
