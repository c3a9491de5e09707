"""The PPO run configuration: a frozen dataclass, TOML loading, validation.

Names and defaults are Spinning Up's (``spinup/algos/pytorch/ppo``), so an origin
command carries over.  Two defaults differ on purpose and say so: ``max_ep_len``
(the environment's own time limit instead of 1000) and ``env``.
Precedence: these defaults < ``--config FILE.toml`` < command-line options.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from synapto.errors import UsageError

#: keys a ``--config`` TOML file may hold: the fields below plus how to run them.
RUN_KEYS = frozenset({"cpu", "out"})


@dataclass(frozen=True)
class PPOConfig:
    """Everything that determines a PPO run's results (given the number of ranks)."""

    env: str = "BipedalWalker-v3"  #: gymnasium environment id
    hid: tuple[int, ...] = (64, 64)  #: hidden layer sizes of both the policy and the value MLP
    gamma: float = 0.99  #: discount factor
    lam: float = 0.97  #: GAE lambda
    epochs: int = 50  #: epochs (rollout + update) to run
    steps_per_epoch: int = 4000  #: env steps per epoch over all ranks (each rank runs steps // ranks)
    seed: int = 0  #: run seed; every random number of the run derives from it
    pi_lr: float = 3e-4  #: Adam learning rate of the policy
    vf_lr: float = 1e-3  #: Adam learning rate of the value function
    train_pi_iters: int = 80  #: maximum policy steps per epoch (fewer on early stopping)
    train_v_iters: int = 80  #: value-function steps per epoch
    clip_ratio: float = 0.2  #: PPO clip epsilon
    target_kl: float = 0.01  #: policy updates stop once rank-averaged approx. KL > 1.5 * target_kl (0: never)
    max_ep_len: int | None = None  #: episode cap; None = the env's time limit (min of the two when both)
    save_freq: int = 10  #: keep the parameters after every epoch k with k % save_freq == 0
    exp_name: str = ""  #: experiment name in config.json (Spinning Up's plotter groups by it); "" = ppo_<env>
    dtype: str = "float32"  #: network arithmetic: float32 (as PyTorch) or float64
    # -- beyond Spinning Up: what rl-zoo's tuned PPO uses (docs/ppo.md); the defaults change nothing
    #: environments in all, split evenly over the ranks (each rank steps its n_envs / ranks in lockstep, each
    #: env steps_per_epoch // n_envs steps); 1: one env per rank, steps_per_epoch // ranks steps (Spinning Up)
    n_envs: int = 1
    obs_norm: bool = False  #: normalise observations by running mean and std (all ranks' rollouts), clip +-10
    reward_scale: bool = False  #: divide rewards by the running std of the discounted return, clip +-10
    lr_schedule: str = "constant"  #: constant, or linear: pi_lr and vf_lr fall from their value to value / epochs
    #: > 0: update_epochs passes over shuffled minibatches of this many steps (over all ranks), policy and value
    #: stepped together (the clipped loss, lambda-returns as value targets, advantages normalised per minibatch);
    #: 0: Spinning Up's full-batch steps (train_pi_iters, train_v_iters)
    minibatch_size: int = 0
    update_epochs: int = 10  #: passes over the epoch's steps (minibatch_size > 0)
    #: with several ranks and minibatch_size > 0: "gathered" (the epoch's rows go to rank 0 once, which runs
    #: the whole update alone and broadcasts the parameters) or "allreduce" (every rank walks its own rows,
    #: minibatch_size // ranks a step, gradients averaged in one Allreduce per minibatch); one rank: the same
    minibatch_update: str = "gathered"
    ent_coef: float = 0.0  #: entropy bonus of the policy loss (minibatch_size > 0)
    vf_coef: float = 0.5  #: weight of the value loss in the gradient norm that max_grad_norm clips (minibatches)
    max_grad_norm: float = 0.0  #: clip the joint gradient norm of a minibatch to this (0: no clipping)
    adam_eps: float = 1e-8  #: Adam's epsilon, both networks
    log_std_init: float = -0.5  #: initial log standard deviation of a Gaussian policy
    #: orthogonal initial weights (gain sqrt 2 in hidden layers, 0.01 at the policy's output, 1 at the
    #: value's) and zero biases, instead of PyTorch's default uniform
    ortho_init: bool = False
    test_episodes: int = 0  #: after training, test the final policy (mean action) on this many PPO_TEST episodes

    #: fields that ``--resume`` may change (everything else would change the run)
    RESUMABLE = ("epochs",)

    def __post_init__(self):
        object.__setattr__(self, "hid", tuple(self.hid))
        if not self.exp_name and isinstance(self.env, str):
            object.__setattr__(self, "exp_name", "ppo_" + safe_name(self.env))
        self.validate()

    def validate(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise UsageError(msg)

        def integer(name: str, low: int) -> None:
            v = getattr(self, name)
            need(
                isinstance(v, int) and not isinstance(v, bool) and v >= low,
                f"--{name.replace('_', '-')} must be an integer >= {low}, got {v!r}",
            )

        def real(name: str, low: float, high: float, low_open: bool = False) -> None:
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (v > low if low_open else v >= low) and v <= high
            interval = f"{'(' if low_open else '['}{low}, {high}]"
            need(ok, f"--{name.replace('_', '-')} must be a number in {interval}, got {v!r}")

        need(isinstance(self.env, str) and bool(self.env), f"--env must be a gymnasium id, got {self.env!r}")
        need(
            all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in self.hid),
            f"--hid must be positive integer layer sizes, got {list(self.hid)!r}",
        )
        integer("epochs", 1)
        integer("steps_per_epoch", 1)
        integer("seed", 0)
        integer("train_pi_iters", 1)
        integer("train_v_iters", 1)
        integer("save_freq", 1)
        if self.max_ep_len is not None:
            integer("max_ep_len", 1)
        real("gamma", 0.0, 1.0)
        real("lam", 0.0, 1.0)
        real("pi_lr", 0.0, math.inf, low_open=True)
        real("vf_lr", 0.0, math.inf, low_open=True)
        real("clip_ratio", 0.0, 1.0, low_open=True)
        real("target_kl", 0.0, math.inf)  # 0: no early stopping
        need(self.dtype in ("float32", "float64"), f"--dtype must be float32 or float64, got {self.dtype!r}")
        integer("n_envs", 1)
        integer("minibatch_size", 0)
        integer("update_epochs", 1)
        integer("test_episodes", 0)
        for name in ("obs_norm", "reward_scale", "ortho_init"):
            need(
                isinstance(getattr(self, name), bool),
                f"--{name.replace('_', '-')} must be true or false, got {getattr(self, name)!r}",
            )
        need(
            self.minibatch_update in ("gathered", "allreduce"),
            f"--minibatch-update must be gathered or allreduce, got {self.minibatch_update!r}",
        )
        need(
            self.lr_schedule in ("constant", "linear"),
            f"--lr-schedule must be constant or linear, got {self.lr_schedule!r}",
        )
        real("ent_coef", 0.0, math.inf)
        real("vf_coef", 0.0, math.inf, low_open=True)
        real("max_grad_norm", 0.0, math.inf)
        real("adam_eps", 0.0, 1.0, low_open=True)
        real("log_std_init", -20.0, 5.0)
        if isinstance(self.n_envs, int) and isinstance(self.steps_per_epoch, int):
            need(
                self.steps_per_epoch >= self.n_envs,
                f"--steps-per-epoch {self.steps_per_epoch} is below --n-envs {self.n_envs}: every env needs a step",
            )
        if isinstance(self.minibatch_size, int) and isinstance(self.steps_per_epoch, int):
            need(
                self.minibatch_size <= self.steps_per_epoch,
                f"--minibatch-size {self.minibatch_size} is above --steps-per-epoch {self.steps_per_epoch}",
            )
        need(isinstance(self.exp_name, str), f"--exp-name must be a string, got {self.exp_name!r}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def lr_factor(self, epoch: int) -> float:
        """The learning rates' multiplier in epoch ``epoch`` (``lr_schedule``)."""
        return 1.0 if self.lr_schedule == "constant" else 1.0 - epoch / self.epochs

    @classmethod
    def from_toml(cls, path, **overrides) -> PPOConfig:
        """The config of a TOML file, or of a shipped config by name (``"ppo_bipedal"``), read as
        ``ppo --config`` reads it; ``overrides`` win.  ``cpu`` and ``out`` are not part of a config."""
        from synapto.config import one_seed

        values = load_ppo_toml(path)
        for key in RUN_KEYS:
            values.pop(key, None)
        if "seed" in values and "seed" not in overrides:
            values["seed"] = one_seed(values["seed"], path)
        return build_config({**values, **overrides})

    @classmethod
    def from_json(cls, text: str) -> PPOConfig:
        """The config a run file stores; a field the file predates takes the value the run
        was made with (``LEGACY``), not today's default."""
        data = {**LEGACY, **json.loads(text)}
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    def changed(self, other: PPOConfig) -> list[str]:
        """Names of the fields that differ (``RESUMABLE`` ones excepted)."""
        return [
            f.name
            for f in dataclasses.fields(self)
            if f.name not in self.RESUMABLE and getattr(self, f.name) != getattr(other, f.name)
        ]


#: fields added after run files were written, with the behaviour those runs had
LEGACY: dict[str, Any] = {"minibatch_update": "allreduce"}


def field_names() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(PPOConfig))


def safe_name(text: str) -> str:
    """``text`` usable in a file name (env ids may hold ``/`` or ``:``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


@overload
def parse_hid(values: None) -> None: ...
@overload
def parse_hid(values: list[str] | tuple) -> tuple[int, ...]: ...
def parse_hid(values: list[str] | tuple | None) -> tuple[int, ...] | None:
    """``--hid 32 32``, ``--hid 32,32``, ``--hid "[32,32]"`` or ``--hid "(32, 32)"`` -> ``(32, 32)``
    (:func:`synapto.options.layer_sizes`, the spellings of ``evolve --hidden`` too)."""
    from synapto.options import layer_sizes

    if values is None:
        return None
    sizes = layer_sizes("--hid", values)
    for size in sizes:
        if size <= 0:
            raise UsageError(f"--hid {list(values)!r}: layer sizes must be positive integers, got {size}")
    return sizes


def load_ppo_toml(path: str | Path) -> dict[str, Any]:
    """The keys of a ``--config`` file: PPOConfig fields, ``seed`` (one or a list), ``cpu``, ``out``."""
    from synapto.config import load_toml

    data = load_toml(path, set(field_names() | RUN_KEYS))
    if "hid" in data:
        hid = data["hid"]
        data["hid"] = parse_hid(list(hid) if isinstance(hid, (list, tuple)) else [hid])
    return data


def build_config(values: Mapping[str, Any]) -> PPOConfig:
    """A validated PPOConfig from a mapping of field values (bad types -> UsageError)."""
    try:
        return PPOConfig(**values)
    except TypeError as exc:
        raise UsageError(f"bad option value: {exc}") from None
