"""Command line of the PPO baseline: ``ppo`` and ``ppo-eval`` (``bench ppo`` is :mod:`synapto.bench.ppo`'s).

:func:`register` adds the commands to synapto's typer apps.  ``ppo`` is its option table;
:func:`synapto.ppo.command.ppo_command` does the rest.  Option names and
defaults follow Spinning Up (``python -m spinup.run ppo``), with its underscore
spellings accepted too (synapto's main() reads ``--a_b`` as ``--a-b``), so an origin command carries over::

    python -m synapto ppo --hid "[32,32]" --env BipedalWalker-v3 --exp_name x --gamma 0.999 \\
        --epochs 1000 --steps_per_epoch 40000 --seed 13 42 1337 --cpu 40
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from synapto.errors import UsageError
from synapto.logs import say as _log
from synapto.ppo.config import PPOConfig

#: options taking several space-separated values; synapto's main() rewrites
#: ``--hid 32 32`` to ``--hid 32 --hid 32`` for these
MULTI_VALUE_OPTIONS = ("--hid", "--seed")

_P: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(PPOConfig)}
_HID = [str(h) for h in _P["hid"]]  #: --hid's default, as typer shows it
#: ppo's help in panels: one table of 80 columns per panel stays readable
PANELS = {
    "run": "The run",
    "ppo": "PPO",
    "norm": "Normalisation and initialisation",
    "exec": "Execution",
    "track": "Tracking",
}


def ppo(
    ctx: typer.Context,
    env: Annotated[str, typer.Option(rich_help_panel=PANELS["run"], help="Gymnasium environment id.")] = _P["env"],
    hid: Annotated[
        list[str],
        typer.Option(
            rich_help_panel=PANELS["run"],
            help='Hidden layer sizes of policy and value MLPs: --hid 32 32 or --hid "[32,32]".',
        ),
    ] = _HID,
    gamma: Annotated[float, typer.Option(rich_help_panel=PANELS["ppo"], help="Discount factor.")] = _P["gamma"],
    lam: Annotated[float, typer.Option(rich_help_panel=PANELS["ppo"], help="GAE lambda.")] = _P["lam"],
    epochs: Annotated[
        int, typer.Option(rich_help_panel=PANELS["run"], help="Epochs to run (with --resume: the new total).")
    ] = _P["epochs"],
    steps_per_epoch: Annotated[
        int,
        typer.Option(
            "--steps-per-epoch",
            rich_help_panel=PANELS["run"],
            help="Env steps per epoch over all ranks; each rank runs steps // ranks.",
        ),
    ] = _P["steps_per_epoch"],
    seed: Annotated[
        list[int], typer.Option(rich_help_panel=PANELS["run"], help="Run seed(s); several run one after another.")
    ] = [_P["seed"]],  # noqa: B006
    cpu: Annotated[
        int,
        typer.Option(
            rich_help_panel=PANELS["exec"],
            help="MPI processes: relaunch under `mpiexec -n N` (when started by mpirun/mpiexec, N must match).",
        ),
    ] = 1,
    pi_lr: Annotated[
        float, typer.Option("--pi-lr", rich_help_panel=PANELS["ppo"], help="Policy learning rate (Adam).")
    ] = _P["pi_lr"],
    vf_lr: Annotated[
        float, typer.Option("--vf-lr", rich_help_panel=PANELS["ppo"], help="Value learning rate (Adam).")
    ] = _P["vf_lr"],
    train_pi_iters: Annotated[
        int, typer.Option("--train-pi-iters", rich_help_panel=PANELS["ppo"], help="Maximum policy steps per epoch.")
    ] = _P["train_pi_iters"],
    train_v_iters: Annotated[
        int, typer.Option("--train-v-iters", rich_help_panel=PANELS["ppo"], help="Value steps per epoch.")
    ] = _P["train_v_iters"],
    clip_ratio: Annotated[
        float, typer.Option("--clip-ratio", rich_help_panel=PANELS["ppo"], help="PPO clip epsilon.")
    ] = _P["clip_ratio"],
    target_kl: Annotated[
        float,
        typer.Option(
            "--target-kl", rich_help_panel=PANELS["ppo"], help="Stop policy steps when the KL exceeds 1.5 x this."
        ),
    ] = _P["target_kl"],
    max_ep_len: Annotated[
        int | None,
        typer.Option(
            "--max-ep-len",
            rich_help_panel=PANELS["ppo"],
            help="Episode cap (bootstrapped like a time limit); 1000 reproduces Spinning Up.",
            show_default="the env's time limit, 1600 for BipedalWalker-v3",
        ),
    ] = None,
    save_freq: Annotated[
        int,
        typer.Option(
            "--save-freq", rich_help_panel=PANELS["exec"], help="Keep the parameters after epochs 0, N, 2N, ..."
        ),
    ] = _P["save_freq"],
    exp_name: Annotated[
        str | None,
        typer.Option(
            "--exp-name",
            rich_help_panel=PANELS["run"],
            help="Experiment name in config.json (Spinning Up's plots group by it).",
            show_default="ppo_<env>",
        ),
    ] = None,
    dtype: Annotated[
        str, typer.Option(rich_help_panel=PANELS["exec"], help="Network arithmetic: float32 or float64.")
    ] = _P["dtype"],
    n_envs: Annotated[
        int,
        typer.Option(
            "--n-envs",
            rich_help_panel=PANELS["exec"],
            help="Environments in all, split evenly over the processes (1: one per process).",
        ),
    ] = _P["n_envs"],
    obs_norm: Annotated[
        bool,
        typer.Option(
            "--obs-norm/--no-obs-norm",
            rich_help_panel=PANELS["norm"],
            help="Normalise observations by running statistics.",
        ),
    ] = _P["obs_norm"],
    reward_scale: Annotated[
        bool,
        typer.Option(
            "--reward-scale/--no-reward-scale",
            rich_help_panel=PANELS["norm"],
            help="Divide rewards by the running std of the discounted return.",
        ),
    ] = _P["reward_scale"],
    lr_schedule: Annotated[
        str,
        typer.Option(
            "--lr-schedule", rich_help_panel=PANELS["ppo"], help="constant, or linear (decay over the epochs)."
        ),
    ] = _P["lr_schedule"],
    minibatch_size: Annotated[
        int,
        typer.Option(
            "--minibatch-size",
            rich_help_panel=PANELS["ppo"],
            help="> 0: minibatch updates of this many steps (docs/ppo.md); 0: Spinning Up's full-batch steps.",
        ),
    ] = _P["minibatch_size"],
    update_epochs: Annotated[
        int,
        typer.Option(
            "--update-epochs", rich_help_panel=PANELS["ppo"], help="Passes over an epoch's steps with --minibatch-size."
        ),
    ] = _P["update_epochs"],
    minibatch_update: Annotated[
        str,
        typer.Option(
            "--minibatch-update",
            rich_help_panel=PANELS["exec"],
            help="With several processes: gathered (rank 0 updates on every row, then broadcasts) or "
            "allreduce (one Allreduce per minibatch).",
        ),
    ] = _P["minibatch_update"],
    ent_coef: Annotated[float, typer.Option("--ent-coef", rich_help_panel=PANELS["ppo"], help="Entropy bonus.")] = _P[
        "ent_coef"
    ],
    vf_coef: Annotated[
        float,
        typer.Option(
            "--vf-coef", rich_help_panel=PANELS["ppo"], help="Value loss weight in the clipped gradient norm."
        ),
    ] = _P["vf_coef"],
    max_grad_norm: Annotated[
        float,
        typer.Option(
            "--max-grad-norm", rich_help_panel=PANELS["ppo"], help="Clip a minibatch's gradient norm to this; 0: off."
        ),
    ] = _P["max_grad_norm"],
    adam_eps: Annotated[float, typer.Option("--adam-eps", rich_help_panel=PANELS["ppo"], help="Adam's epsilon.")] = _P[
        "adam_eps"
    ],
    log_std_init: Annotated[
        float,
        typer.Option("--log-std-init", rich_help_panel=PANELS["ppo"], help="Initial log std of a Gaussian policy."),
    ] = _P["log_std_init"],
    ortho_init: Annotated[
        bool,
        typer.Option(
            "--ortho-init/--no-ortho-init", rich_help_panel=PANELS["norm"], help="Orthogonal initial weights."
        ),
    ] = _P["ortho_init"],
    test_episodes: Annotated[
        int,
        typer.Option(
            "--test-episodes",
            rich_help_panel=PANELS["run"],
            help="Test the final policy on this many episodes into the run file.",
        ),
    ] = _P["test_episodes"],
    out: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel=PANELS["run"],
            help="Run file (.h5); progress.txt and config.json go in the folder of the same name without .h5. "
            "With several seeds _s<seed> is inserted before .h5.",
            show_default="runs/ppo_<env>_s<seed>.h5",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel=PANELS["run"],
            help="TOML file of options, or a shipped one's name (ppo_bipedal); command-line options override it.",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel=PANELS["run"],
            help="Continue a stopped PPO run file bit-identically (same number of processes; "
            "only --epochs and --cpu may be given).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", rich_help_panel=PANELS["run"], help="Overwrite existing output files.")
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            rich_help_panel=PANELS["exec"],
            help="Check the options, the config and the output paths, print what would run, and exit "
            "without running or writing anything.",
        ),
    ] = False,
    tensorboard: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel=PANELS["track"],
            help="Write every epoch's statistics as TensorBoard scalars into this folder, stepped by env "
            "steps (TotalEnvInteracts; run/generation: the epoch; needs the tensorboard extra).",
            show_default="off",
        ),
    ] = None,
    live_log: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel=PANELS["track"],
            help="Append every epoch's statistics to this file as it runs: .csv or "
            ".jsonl (column generation: the epoch).",
            show_default="off",
        ),
    ] = None,
):
    """Train PPO (Spinning Up's PPO-clip, in numpy) with MPI: reproducible and resumable."""
    from synapto.ppo.command import ppo_command

    ppo_command(ctx, dict(locals()))


def ppo_eval(
    run: Annotated[Path, typer.Argument(help="PPO run file (.h5) written by `synapto ppo`.")],
    episodes: Annotated[int, typer.Option(help="Test episodes.")] = 100,
    params: Annotated[
        str,
        typer.Option(
            help="Which parameters: latest (final, else the last checkpoint), final, or an epoch number "
            "kept by --save-freq."
        ),
    ] = "latest",
    max_ep_len: Annotated[
        int | None, typer.Option("--max-ep-len", help="Episode cap.", show_default="the run's")
    ] = None,
):
    """Test a trained policy deterministically (mean action) on the test seed stream."""
    from synapto.ppo.evaluate import evaluate_run

    if episodes < 1:
        raise UsageError(f"--episodes must be an integer >= 1, got {episodes}")
    if max_ep_len is not None and max_ep_len < 1:
        raise UsageError(f"--max-ep-len must be an integer >= 1, got {max_ep_len}")
    result = evaluate_run(run, episodes, params, max_ep_len)
    r = result["returns"]
    _log(
        f"ppo-eval {run} ({result['params']}, {result['env']}, seed stream PPO_TEST of run seed "
        f"{result['seed']}): {episodes} episodes, return {r.mean():.2f} +- {r.std():.2f} "
        f"(min {r.min():.2f}, max {r.max():.2f}), length {result['lengths'].mean():.1f}"
    )


def register(app: typer.Typer) -> None:
    """Add ``ppo`` and ``ppo-eval`` to ``app``."""
    app.command("ppo")(ppo)
    app.command("ppo-eval")(ppo_eval)
