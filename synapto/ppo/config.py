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

from synapto.common.config import load_toml, one_seed
from synapto.common.declare import opt
from synapto.common.errors import UsageError
from synapto.common.options import layer_sizes

#: keys a ``--config`` TOML file may hold: the fields below plus how to run them.
RUN_KEYS = frozenset({"cpu", "out"})


#: ppo's help panels: one table of 80 columns per panel stays readable
RUN, PPO, NORM, EXEC, TRACK = "The run", "PPO", "Normalisation and initialisation", "Execution", "Tracking"


def _opt(default, panel: str, help: str, **meta):
    """An option of ``ppo`` that a ``--config`` file may set too."""
    return opt(default, panel=panel, help=help, config=True, **meta)


@dataclass(frozen=True)
class PPOConfig:
    """Everything that determines a PPO run's results (given the number of ranks); each
    field an option of ``synapto ppo`` (:mod:`synapto.common.declare`)."""

    env: str = _opt("BipedalWalker-v3", RUN, "Gymnasium environment id.")
    hid: tuple[int, ...] = _opt(
        (64, 64),
        RUN,
        'Hidden layer sizes of policy and value MLPs: --hid 32 32 or --hid "[32,32]".',
        cli=list[str],
        multi=True,
    )
    gamma: float = _opt(0.99, PPO, "Discount factor.")
    lam: float = _opt(0.97, PPO, "GAE lambda.")
    epochs: int = _opt(50, RUN, "Epochs to run (with --resume: the new total).")
    steps_per_epoch: int = _opt(4000, RUN, "Env steps per epoch over all ranks; each rank runs steps // ranks.")
    #: run seed; every random number of the run derives from it (several on the command line: one run each)
    seed: int = _opt(0, RUN, "Run seed(s); several run one after another.", cli=list[int], shown=[0], multi=True)
    pi_lr: float = _opt(3e-4, PPO, "Policy learning rate (Adam).")
    vf_lr: float = _opt(1e-3, PPO, "Value learning rate (Adam).")
    train_pi_iters: int = _opt(80, PPO, "Maximum policy steps per epoch.")  #: fewer on early stopping
    train_v_iters: int = _opt(80, PPO, "Value steps per epoch.")
    clip_ratio: float = _opt(0.2, PPO, "PPO clip epsilon.")
    #: policy updates stop once rank-averaged approx. KL > 1.5 * target_kl (0: never)
    target_kl: float = _opt(0.01, PPO, "Stop policy steps when the KL exceeds 1.5 x this.")
    #: episode cap; None = the env's time limit (min of the two when both)
    max_ep_len: int | None = _opt(
        None,
        PPO,
        "Episode cap (bootstrapped like a time limit); 1000 reproduces Spinning Up.",
        show_default="the env's time limit, 1600 for BipedalWalker-v3",
    )
    save_freq: int = _opt(10, EXEC, "Keep the parameters after epochs 0, N, 2N, ...")
    exp_name: str = _opt(
        "",
        RUN,
        "Experiment name in config.json (Spinning Up's plots group by it).",
        cli=str | None,
        shown=None,
        show_default="ppo_<env>",
    )
    dtype: str = _opt("float32", EXEC, "Network arithmetic: float32 or float64.")  #: float32 as PyTorch
    # -- beyond Spinning Up: what rl-zoo's tuned PPO uses (docs/ppo.md); the defaults change nothing
    #: environments in all, split evenly over the ranks (each rank steps its n_envs / ranks in lockstep, each
    #: env steps_per_epoch // n_envs steps); 1: one env per rank, steps_per_epoch // ranks steps (Spinning Up)
    n_envs: int = _opt(1, EXEC, "Environments in all, split evenly over the processes (1: one per process).")
    #: normalise observations by running mean and std (all ranks' rollouts), clip +-10
    obs_norm: bool = _opt(
        False, NORM, "Normalise observations by running statistics.", flags=("--obs-norm/--no-obs-norm",)
    )
    #: divide rewards by the running std of the discounted return, clip +-10
    reward_scale: bool = _opt(
        False,
        NORM,
        "Divide rewards by the running std of the discounted return.",
        flags=("--reward-scale/--no-reward-scale",),
    )
    #: constant, or linear: pi_lr and vf_lr fall from their value to value / epochs
    lr_schedule: str = _opt("constant", PPO, "constant, or linear (decay over the epochs).")
    #: > 0: update_epochs passes over shuffled minibatches of this many steps (over all ranks), policy and value
    #: stepped together (the clipped loss, lambda-returns as value targets, advantages normalised per minibatch);
    #: 0: Spinning Up's full-batch steps (train_pi_iters, train_v_iters)
    minibatch_size: int = _opt(
        0, PPO, "> 0: minibatch updates of this many steps (docs/ppo.md); 0: Spinning Up's full-batch steps."
    )
    update_epochs: int = _opt(10, PPO, "Passes over an epoch's steps with --minibatch-size.")
    #: with several ranks and minibatch_size > 0: "gathered" (the epoch's rows go to rank 0 once, which runs
    #: the whole update alone and broadcasts the parameters) or "allreduce" (every rank walks its own rows,
    #: minibatch_size // ranks a step, gradients averaged in one Allreduce per minibatch); one rank: the same
    minibatch_update: str = _opt(
        "gathered",
        EXEC,
        "With several processes: gathered (rank 0 updates on every row, then broadcasts) or "
        "allreduce (one Allreduce per minibatch).",
    )
    ent_coef: float = _opt(0.0, PPO, "Entropy bonus.")  #: of the policy loss (minibatch_size > 0)
    #: weight of the value loss in the gradient norm that max_grad_norm clips (minibatches)
    vf_coef: float = _opt(0.5, PPO, "Value loss weight in the clipped gradient norm.")
    max_grad_norm: float = _opt(0.0, PPO, "Clip a minibatch's gradient norm to this; 0: off.")
    adam_eps: float = _opt(1e-8, PPO, "Adam's epsilon.")  #: both networks
    log_std_init: float = _opt(-0.5, PPO, "Initial log std of a Gaussian policy.")
    #: orthogonal initial weights (gain sqrt 2 in hidden layers, 0.01 at the policy's output, 1 at the
    #: value's) and zero biases, instead of PyTorch's default uniform
    ortho_init: bool = _opt(False, NORM, "Orthogonal initial weights.", flags=("--ortho-init/--no-ortho-init",))
    #: after training, test the final policy (mean action) on this many PPO_TEST episodes
    test_episodes: int = _opt(0, RUN, "Test the final policy on this many episodes into the run file.")

    #: fields that ``--resume`` may change (everything else would change the run)
    RESUMABLE = ("epochs",)

    def __post_init__(self):
        object.__setattr__(self, "hid", tuple(self.hid))
        if not self.exp_name and isinstance(self.env, str):
            object.__setattr__(self, "exp_name", "ppo_" + safe_name(self.env))
        self.validate()

    def validate(self) -> None:
        _need(isinstance(self.env, str) and bool(self.env), f"--env must be a gymnasium id, got {self.env!r}")
        _need(
            all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in self.hid),
            f"--hid must be positive integer layer sizes, got {list(self.hid)!r}",
        )
        for name, low in _INTEGERS[:7]:
            if name != "max_ep_len" or self.max_ep_len is not None:  # None: the env's time limit
                _integer(self, name, low)
        for real in _REALS[:6]:
            _real(self, *real)
        _need(self.dtype in ("float32", "float64"), f"--dtype must be float32 or float64, got {self.dtype!r}")
        for name, low in _INTEGERS[7:]:
            _integer(self, name, low)
        for name in ("obs_norm", "reward_scale", "ortho_init"):
            _need(
                isinstance(getattr(self, name), bool),
                f"{_flag(name)} must be true or false, got {getattr(self, name)!r}",
            )
        for name, a, b in (("minibatch_update", "gathered", "allreduce"), ("lr_schedule", "constant", "linear")):
            _need(getattr(self, name) in (a, b), f"{_flag(name)} must be {a} or {b}, got {getattr(self, name)!r}")
        for real in _REALS[6:]:
            _real(self, *real)
        if isinstance(self.n_envs, int) and isinstance(self.steps_per_epoch, int):
            _need(
                self.steps_per_epoch >= self.n_envs,
                f"--steps-per-epoch {self.steps_per_epoch} is below --n-envs {self.n_envs}: every env needs a step",
            )
        if isinstance(self.minibatch_size, int) and isinstance(self.steps_per_epoch, int):
            _need(
                self.minibatch_size <= self.steps_per_epoch,
                f"--minibatch-size {self.minibatch_size} is above --steps-per-epoch {self.steps_per_epoch}",
            )
        _need(isinstance(self.exp_name, str), f"--exp-name must be a string, got {self.exp_name!r}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def lr_factor(self, epoch: int) -> float:
        """The learning rates' multiplier in epoch ``epoch`` (``lr_schedule``)."""
        return 1.0 if self.lr_schedule == "constant" else 1.0 - epoch / self.epochs

    @classmethod
    def from_toml(cls, path, **overrides) -> PPOConfig:
        """The config of a TOML file, or of a shipped config by name (``"ppo_bipedal"``), read as
        ``ppo --config`` reads it; ``overrides`` win.  ``cpu`` and ``out`` are not part of a config."""
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


#: the integer fields and their lowest value, in the order :meth:`PPOConfig.validate` checks them
_INTEGERS = (
    *(("epochs", 1), ("steps_per_epoch", 1), ("seed", 0), ("train_pi_iters", 1), ("train_v_iters", 1)),
    *(("save_freq", 1), ("max_ep_len", 1), ("n_envs", 1), ("minibatch_size", 0), ("update_epochs", 1)),
    ("test_episodes", 0),
)
#: the real-valued fields and their range ``(name, low, high, low_open)``, in the order
#: :meth:`PPOConfig.validate` checks them (target_kl 0: no early stopping)
_REALS = (
    ("gamma", 0.0, 1.0, False),
    ("lam", 0.0, 1.0, False),
    ("pi_lr", 0.0, math.inf, True),
    ("vf_lr", 0.0, math.inf, True),
    ("clip_ratio", 0.0, 1.0, True),
    ("target_kl", 0.0, math.inf, False),
    ("ent_coef", 0.0, math.inf, False),
    ("vf_coef", 0.0, math.inf, True),
    ("max_grad_norm", 0.0, math.inf, False),
    ("adam_eps", 0.0, 1.0, True),
    ("log_std_init", -20.0, 5.0, False),
)


def _need(ok: bool, msg: str) -> None:
    if not ok:
        raise UsageError(msg)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _integer(cfg, name: str, low: int) -> None:
    v = getattr(cfg, name)
    _need(
        isinstance(v, int) and not isinstance(v, bool) and v >= low,
        f"{_flag(name)} must be an integer >= {low}, got {v!r}",
    )


def _real(cfg, name: str, low: float, high: float, low_open: bool) -> None:
    v = getattr(cfg, name)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ok = ok and (v > low if low_open else v >= low) and v <= high
    interval = f"{'(' if low_open else '['}{low}, {high}]"
    _need(ok, f"{_flag(name)} must be a number in {interval}, got {v!r}")


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
    (:func:`synapto.common.options.layer_sizes`, the spellings of ``evolve --hidden`` too)."""
    if values is None:
        return None
    sizes = layer_sizes("--hid", values)
    for size in sizes:
        if size <= 0:
            raise UsageError(f"--hid {list(values)!r}: layer sizes must be positive integers, got {size}")
    return sizes


def load_ppo_toml(path: str | Path) -> dict[str, Any]:
    """The keys of a ``--config`` file: PPOConfig fields, ``seed`` (one or a list), ``cpu``, ``out``."""
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


@dataclass(frozen=True)
class RunOptions:
    """``synapto ppo``'s options beside :class:`synapto.ppo.config.PPOConfig`'s: how and where it runs."""

    cpu: int = opt(
        1,
        panel=EXEC,
        after="seed",
        help="MPI processes: relaunch under `mpiexec -n N` (when started by mpirun/mpiexec, N must match).",
    )
    out: Path | None = opt(
        None,
        panel=RUN,
        config=True,
        help="Run file (.h5); progress.txt and config.json go in the folder of the same name without .h5. "
        "With several seeds _s<seed> is inserted before .h5.",
        show_default="runs/ppo_<env>_s<seed>.h5",
    )
    config: Path | None = opt(
        None,
        panel=RUN,
        help="TOML file of options, or a shipped one's name (ppo_bipedal); command-line options override it.",
        show_default=False,
    )
    resume: Path | None = opt(
        None,
        panel=RUN,
        help="Continue a stopped PPO run file bit-identically (same number of processes; "
        "only --epochs and --cpu may be given).",
        show_default=False,
    )
    force: bool = opt(False, panel=RUN, flags=("--force",), help="Overwrite existing output files.")
    check: bool = opt(
        False,
        panel=EXEC,
        flags=("--check",),
        help="Check the options, the config and the output paths, print what would run, and exit "
        "without running or writing anything.",
    )
    tensorboard: Path | None = opt(
        None,
        panel=TRACK,
        help="Write every epoch's statistics as TensorBoard scalars into this folder, stepped by env "
        "steps (TotalEnvInteracts; run/generation: the epoch; needs the tensorboard extra).",
        show_default="off",
    )
    live_log: Path | None = opt(
        None,
        panel=TRACK,
        help="Append every epoch's statistics to this file as it runs: .csv or .jsonl (column generation: the epoch).",
        show_default="off",
    )
