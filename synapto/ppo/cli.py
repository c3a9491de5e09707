"""Command line of the PPO baseline: ``ppo`` and ``ppo-eval`` (``bench ppo`` is :mod:`synapto.bench.ppo`'s).

:func:`register` adds the commands to synapto's typer apps.  ``ppo``'s options are the
fields of :class:`synapto.ppo.config.PPOConfig` and :class:`synapto.ppo.config.RunOptions`;
:func:`synapto.ppo.command.ppo_command` does the rest.  Option names and
defaults follow Spinning Up (``python -m spinup.run ppo``), with its underscore
spellings accepted too (synapto's main() reads ``--a_b`` as ``--a-b``), so an origin command carries over::

    python -m synapto ppo --hid "[32,32]" --env BipedalWalker-v3 --exp_name x --gamma 0.999 \\
        --epochs 1000 --steps_per_epoch 40000 --seed 13 42 1337 --cpu 40
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from synapto.common.declare import Request, command, multi_value_flags
from synapto.common.errors import UsageError
from synapto.common.logs import say as _log
from synapto.ppo.config import PPOConfig, RunOptions

#: options taking several space-separated values; synapto's main() rewrites
#: ``--hid 32 32`` to ``--hid 32 --hid 32`` for these
MULTI_VALUE_OPTIONS = multi_value_flags(PPOConfig)


def ppo(request: Request) -> None:
    """Train PPO (Spinning Up's PPO-clip, in numpy) with MPI: reproducible and resumable."""
    from synapto.ppo.command import ppo_command

    ppo_command(request)


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
    app.command("ppo")(command(ppo, PPOConfig, RunOptions))
    app.command("ppo-eval")(ppo_eval)
