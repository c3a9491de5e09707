"""Command line of the PPO baseline: ``ppo`` and ``ppo-eval`` (``bench ppo`` is :mod:`synapto.bench.ppo`'s).

:func:`register` adds the commands to synapto's typer apps.  Option names and
defaults follow Spinning Up (``python -m spinup.run ppo``), with its underscore
spellings accepted too (synapto's main() reads ``--a_b`` as ``--a-b``), so an origin command carries over::

    python -m synapto ppo --hid "[32,32]" --env BipedalWalker-v3 --exp_name x --gamma 0.999 \\
        --epochs 1000 --steps_per_epoch 40000 --seed 13 42 1337 --cpu 40
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from synapto.errors import UsageError
from synapto.logs import say as _log
from synapto.ppo.config import PPOConfig

#: options taking several space-separated values; synapto's main() rewrites
#: ``--hid 32 32`` to ``--hid 32 --hid 32`` for these
MULTI_VALUE_OPTIONS = ("--hid", "--seed")



def _agree(comm, rank: int, check) -> None:
    """Run ``check()`` on rank 0 only (file-system checks) and make every rank raise its error."""
    error = None
    if rank == 0:
        try:
            check()
        except UsageError as exc:
            error = str(exc)
    if comm is not None:
        error = comm.bcast(error, root=0)
    if error is not None:
        raise UsageError(error)


def _outputs(out: Path | None, configs) -> list[Path]:
    from synapto.ppo.config import safe_name

    if out is None:
        return [Path("runs") / f"ppo_{safe_name(c.env)}_s{c.seed}.h5" for c in configs]
    out = Path(out)
    if out.suffix != ".h5":
        raise UsageError(f"--out {str(out)!r} must end in .h5 (progress.txt goes in the folder of the same name)")
    if len(configs) == 1:
        return [out]
    return [out.with_name(f"{out.stem}_s{c.seed}{out.suffix}") for c in configs]


def _check_new_outputs(outs: list[Path], force: bool) -> None:
    from synapto.ppo.progress import log_dir
    from synapto.store import check_output_path

    for o in outs:
        check_output_path(o, force)
        progress = log_dir(o) / "progress.txt"
        if progress.exists() and not force:
            raise UsageError(f"--out {str(o)!r}: {str(progress)!r} exists; pass --force to overwrite it")
        if log_dir(o).exists() and not log_dir(o).is_dir():
            raise UsageError(f"--out {str(o)!r}: {str(log_dir(o))!r} exists and is not a folder")


def _check_memory(cfg, space, size: int, under_mpi: bool) -> None:
    """Refuse (exit 2, before anything is written) a run whose epoch buffers and networks
    cannot fit this machine's memory (every rank of a local relaunch counts)."""
    import numpy as np

    from synapto.resources import check_memory, ppo_memory

    def count(sizes):
        return sum((a + 1) * b for a, b in itertools.pairwise(sizes))

    hid = [int(h) for h in cfg.hid]
    n_params = count([space.obs_dim, *hid, space.act_dim]) + count([space.obs_dim, *hid, 1])
    local = int(os.environ.get("MPI_LOCALNRANKS", 1)) if under_mpi else size
    need = ppo_memory(cfg.steps_per_epoch // size, local, space.obs_dim, space.act_dim, hid, n_params,
                      np.dtype(cfg.dtype).itemsize)
    check_memory(need, f"ppo with {cfg.steps_per_epoch:,} steps per epoch over {size} process(es) and "
                       f"hidden sizes {hid}")


_P: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(PPOConfig)}
_HID = [str(h) for h in _P["hid"]]  #: --hid's default, as typer shows it
#: ppo's help in panels: one table of 80 columns per panel stays readable
PANELS = {"run": "The run", "ppo": "PPO", "norm": "Normalisation and initialisation", "exec": "Execution",
          "track": "Tracking"}


def ppo(
    ctx: typer.Context,
    env: Annotated[str, typer.Option(rich_help_panel=PANELS["run"], help="Gymnasium environment id.")] = _P["env"],
    hid: Annotated[list[str], typer.Option(
        rich_help_panel=PANELS["run"],
                help="Hidden layer sizes of policy and value MLPs: --hid 32 32 or --hid \"[32,32]\".")] = \
        _HID,
    gamma: Annotated[float, typer.Option(rich_help_panel=PANELS["ppo"], help="Discount factor.")] = _P["gamma"],
    lam: Annotated[float, typer.Option(rich_help_panel=PANELS["ppo"], help="GAE lambda.")] = _P["lam"],
    epochs: Annotated[int, typer.Option(rich_help_panel=PANELS["run"],
            help="Epochs to run (with --resume: the new total).")] = _P["epochs"],
    steps_per_epoch: Annotated[int, typer.Option(
        "--steps-per-epoch",
        rich_help_panel=PANELS["run"],
                help="Env steps per epoch over all ranks; each rank runs steps // ranks.")] = _P["steps_per_epoch"],
    seed: Annotated[list[int], typer.Option(rich_help_panel=PANELS["run"],
            help="Run seed(s); several run one after another.")] = \
        [_P["seed"]],  # noqa: B006
    cpu: Annotated[int, typer.Option(
        rich_help_panel=PANELS["exec"],
                help="MPI processes: relaunch under `mpiexec -n N` "
                     "(when started by mpirun/mpiexec, N must match).")] = 1,
    pi_lr: Annotated[float, typer.Option("--pi-lr", rich_help_panel=PANELS["ppo"],
            help="Policy learning rate (Adam).")] = _P["pi_lr"],
    vf_lr: Annotated[float, typer.Option("--vf-lr", rich_help_panel=PANELS["ppo"],
            help="Value learning rate (Adam).")] = _P["vf_lr"],
    train_pi_iters: Annotated[int, typer.Option(
        "--train-pi-iters", rich_help_panel=PANELS["ppo"],
                help="Maximum policy steps per epoch.")] = _P["train_pi_iters"],
    train_v_iters: Annotated[int, typer.Option(
        "--train-v-iters", rich_help_panel=PANELS["ppo"], help="Value steps per epoch.")] = _P["train_v_iters"],
    clip_ratio: Annotated[float, typer.Option(
        "--clip-ratio", rich_help_panel=PANELS["ppo"], help="PPO clip epsilon.")] = _P["clip_ratio"],
    target_kl: Annotated[float, typer.Option(
        "--target-kl", rich_help_panel=PANELS["ppo"],
                help="Stop policy steps when the KL exceeds 1.5 x this.")] = _P["target_kl"],
    max_ep_len: Annotated[int | None, typer.Option(
        "--max-ep-len",
        rich_help_panel=PANELS["ppo"],
                help="Episode cap (bootstrapped like a time limit); 1000 reproduces Spinning Up.",
        show_default="the env's time limit, 1600 for BipedalWalker-v3")] = None,
    save_freq: Annotated[int, typer.Option(
        "--save-freq", rich_help_panel=PANELS["exec"],
                help="Keep the parameters after epochs 0, N, 2N, ...")] = _P["save_freq"],
    exp_name: Annotated[str | None, typer.Option(
        "--exp-name", rich_help_panel=PANELS["run"],
                help="Experiment name in config.json (Spinning Up's plots group by it).",
        show_default="ppo_<env>")] = None,
    dtype: Annotated[str, typer.Option(rich_help_panel=PANELS["exec"],
                                       help="Network arithmetic: float32 or float64.")] = _P["dtype"],
    n_envs: Annotated[int, typer.Option("--n-envs", rich_help_panel=PANELS["exec"],
                                        help="Environments in all, split evenly over the processes (1: one per "
                                             "process).")]
        = _P["n_envs"],
    obs_norm: Annotated[bool, typer.Option(
        "--obs-norm/--no-obs-norm", rich_help_panel=PANELS["norm"],
                help="Normalise observations by running statistics.")] = _P["obs_norm"],
    reward_scale: Annotated[bool, typer.Option(
        "--reward-scale/--no-reward-scale",
        rich_help_panel=PANELS["norm"],
                help="Divide rewards by the running std of the discounted return.")] = _P["reward_scale"],
    lr_schedule: Annotated[str, typer.Option(
        "--lr-schedule", rich_help_panel=PANELS["ppo"],
                help="constant, or linear (decay over the epochs).")] = _P["lr_schedule"],
    minibatch_size: Annotated[int, typer.Option(
        "--minibatch-size", rich_help_panel=PANELS["ppo"],
                help="> 0: minibatch updates of this many steps (docs/ppo.md); 0: Spinning Up's "
                                 "full-batch steps.")] = _P["minibatch_size"],
    update_epochs: Annotated[int, typer.Option(
        "--update-epochs", rich_help_panel=PANELS["ppo"],
                help="Passes over an epoch's steps with --minibatch-size.")] = _P["update_epochs"],
    ent_coef: Annotated[float, typer.Option("--ent-coef", rich_help_panel=PANELS["ppo"],
            help="Entropy bonus.")] = _P["ent_coef"],
    vf_coef: Annotated[float, typer.Option(
        "--vf-coef", rich_help_panel=PANELS["ppo"],
                help="Value loss weight in the clipped gradient norm.")] = _P["vf_coef"],
    max_grad_norm: Annotated[float, typer.Option(
        "--max-grad-norm", rich_help_panel=PANELS["ppo"],
                help="Clip a minibatch's gradient norm to this; 0: off.")] = _P["max_grad_norm"],
    adam_eps: Annotated[float, typer.Option("--adam-eps", rich_help_panel=PANELS["ppo"],
            help="Adam's epsilon.")] = _P["adam_eps"],
    log_std_init: Annotated[float, typer.Option(
        "--log-std-init", rich_help_panel=PANELS["ppo"],
                help="Initial log std of a Gaussian policy.")] = _P["log_std_init"],
    ortho_init: Annotated[bool, typer.Option(
        "--ortho-init/--no-ortho-init", rich_help_panel=PANELS["norm"],
                help="Orthogonal initial weights.")] = _P["ortho_init"],
    test_episodes: Annotated[int, typer.Option(
        "--test-episodes", rich_help_panel=PANELS["run"],
                help="Test the final policy on this many episodes into the run file.")]
        = _P["test_episodes"],
    out: Annotated[Path | None, typer.Option(
        rich_help_panel=PANELS["run"],
                help="Run file (.h5); progress.txt and config.json go in the folder of the same name without .h5. "
             "With several seeds _s<seed> is inserted before .h5.",
        show_default="runs/ppo_<env>_s<seed>.h5")] = None,
    config: Annotated[Path | None, typer.Option(
        rich_help_panel=PANELS["run"],
                help="TOML file of options, or a shipped one's name (ppo_bipedal); command-line options override it.",
        show_default=False)] = None,
    resume: Annotated[Path | None, typer.Option(
        rich_help_panel=PANELS["run"],
                help="Continue a stopped PPO run file bit-identically (same number of processes; "
             "only --epochs and --cpu may be given).", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", rich_help_panel=PANELS["run"],
            help="Overwrite existing output files.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", rich_help_panel=PANELS["exec"],
                help="Check the options, the config and the output paths, print what would run, and exit "
                        "without running or writing anything.")] = False,
    tensorboard: Annotated[Path | None, typer.Option(
        rich_help_panel=PANELS["track"], help="Write every epoch's statistics as TensorBoard scalars into this "
                                              "folder (needs the tensorboard extra).", show_default="off")] = None,
    live_log: Annotated[Path | None, typer.Option(
        rich_help_panel=PANELS["track"], help="Append every epoch's statistics to this file as it runs: .csv or "
                                              ".jsonl (column generation: the epoch).", show_default="off")] = None,
):
    """Train PPO (Spinning Up's PPO-clip, in numpy) with MPI: reproducible and resumable."""
    from synapto.cli import given_on_command_line
    from synapto.envs import space_info
    from synapto.parallel.launch import relaunch, under_mpi, world
    from synapto.ppo.config import PPOConfig, build_config, load_ppo_toml, parse_hid
    from synapto.ppo.train import train
    from synapto.store import PPORun

    params: dict[str, Any] = dict(env=env, hid=hid, gamma=gamma, lam=lam, epochs=epochs,
                  steps_per_epoch=steps_per_epoch, seed=seed, pi_lr=pi_lr, vf_lr=vf_lr,
                  train_pi_iters=train_pi_iters, train_v_iters=train_v_iters, clip_ratio=clip_ratio,
                  target_kl=target_kl, max_ep_len=max_ep_len, save_freq=save_freq, exp_name=exp_name,
                  dtype=dtype, out=out, n_envs=n_envs, obs_norm=obs_norm, reward_scale=reward_scale,
                  lr_schedule=lr_schedule, minibatch_size=minibatch_size, update_epochs=update_epochs,
                  ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=max_grad_norm, adam_eps=adam_eps,
                  log_std_init=log_std_init, ortho_init=ortho_init, test_episodes=test_episodes)
    given = {k: params[k] for k in given_on_command_line(ctx, params)}
    if "hid" in given:
        given["hid"] = parse_hid(given["hid"])
    cpu_given = cpu if "cpu" in given_on_command_line(ctx, ["cpu"]) else None
    if cpu_given is not None and (isinstance(cpu_given, bool) or cpu_given < 1):
        raise UsageError(f"--cpu must be an integer >= 1, got {cpu_given!r}")
    from synapto.ppo.threads import update_threads

    update_threads()  # a bad $SYNAPTO_PPO_THREADS stops here, before anything starts
    from synapto.evolution.command import tracking_callbacks

    callbacks = tracking_callbacks(tensorboard, live_log)  # evolution's trackers, one report per epoch

    if resume is not None:
        extra = sorted(set(given) - {"epochs"}) + (["config"] if config is not None else [])
        if extra:
            raise UsageError(f"--resume continues the run as it was configured; drop "
                             f"{', '.join('--' + k.replace('_', '-') for k in extra)} "
                             f"(only --epochs and --cpu may change)")
        with PPORun(resume) as run:
            run.verify()  # damaged data is refused here, before anything is rewritten
            stored, ranks, completed = run.parse_config(PPOConfig.from_json), run.ranks, run.completed
            untested = stored.test_episodes > 0 and run.policy_test() is None  # stopped during its final test
        cfg = dataclasses.replace(stored, epochs=given.get("epochs", stored.epochs))
        if cfg.epochs != stored.epochs and stored.lr_schedule != "constant":
            raise UsageError(f"--epochs: {str(resume)!r} runs a {stored.lr_schedule} learning-rate schedule over "
                             f"its {stored.epochs} epochs; another number of epochs would change every epoch's rate")
        if cpu_given is not None and cpu_given != ranks:
            raise UsageError(f"--cpu {cpu_given}: {str(resume)!r} was run with {ranks} process(es); "
                             f"resume it with --cpu {ranks} to continue it bit-identically")
        if completed >= cfg.epochs and not untested:
            raise UsageError(f"{str(resume)!r} has completed all {completed} epochs; "
                             f"pass --epochs N > {completed} to continue it")
        configs, outs, n_procs = [cfg], [Path(resume)], ranks
    else:
        values = load_ppo_toml(config) if config is not None else {}
        values.update(given)
        seeds = values.pop("seed", [0])
        seeds = [seeds] if isinstance(seeds, int) else list(seeds)
        if not seeds:
            raise UsageError("--seed needs at least one value")
        if len(set(seeds)) != len(seeds):
            raise UsageError(f"--seed has repeated values {seeds}")
        toml_cpu = values.pop("cpu", None)
        n_procs = cpu_given if cpu_given is not None else toml_cpu
        if n_procs is not None and (not isinstance(n_procs, int) or isinstance(n_procs, bool) or n_procs < 1):
            raise UsageError(f"cpu must be an integer >= 1, got {n_procs!r}")
        out_path = values.pop("out", None)
        configs = [build_config({**values, "seed": s}) for s in seeds]
        outs = _outputs(out_path, configs)

    if under_mpi():
        comm, rank, size = world()
        if n_procs is not None and n_procs != size:
            raise UsageError(f"--cpu {n_procs} but this MPI world has {size} process(es); "
                             f"pass --cpu {size} or drop --cpu")
    else:
        comm, rank, size = None, 0, n_procs or 1
    for cfg in configs:
        if cfg.steps_per_epoch < size:
            raise UsageError(f"--steps-per-epoch {cfg.steps_per_epoch} is smaller than the number of "
                             f"processes ({size}); each process needs at least one step")
    space = space_info(configs[0].env)  # a bad --env fails here, once, before any process starts
    for cfg in configs:
        _check_memory(cfg, space, size, comm is not None)
    if resume is None:
        _agree(comm, rank, lambda: _check_new_outputs(outs, force))
    else:
        from synapto.store import check_writable

        _agree(comm, rank, lambda: check_writable(resume))

    if check:
        if rank == 0:
            what = "resumes" if resume is not None else "would run"
            _log(f"ok: {len(configs)} PPO run(s) {what}: {configs[0].env}, hid {list(configs[0].hid)}, "
                 f"{configs[0].epochs} epochs of {configs[0].steps_per_epoch:,} steps on {size} process(es) -> "
                 f"{', '.join(map(str, outs))}")
        return
    if size > 1 and comm is None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        relaunch(size)

    for cfg, o in zip(configs, outs):
        train(cfg, o, comm, resume=resume is not None, force=force, log=_log, callbacks=callbacks)


def ppo_eval(
    run: Annotated[Path, typer.Argument(help="PPO run file (.h5) written by `synapto ppo`.")],
    episodes: Annotated[int, typer.Option(help="Test episodes.")] = 100,
    params: Annotated[str, typer.Option(
        help="Which parameters: latest (final, else the last checkpoint), final, or an epoch number "
             "kept by --save-freq.")] = "latest",
    max_ep_len: Annotated[int | None, typer.Option(
        "--max-ep-len", help="Episode cap.", show_default="the run's")] = None,
):
    """Test a trained policy deterministically (mean action) on the test seed stream."""
    from synapto.ppo.evaluate import evaluate_run

    if episodes < 1:
        raise UsageError(f"--episodes must be an integer >= 1, got {episodes}")
    if max_ep_len is not None and max_ep_len < 1:
        raise UsageError(f"--max-ep-len must be an integer >= 1, got {max_ep_len}")
    result = evaluate_run(run, episodes, params, max_ep_len)
    r = result["returns"]
    _log(f"ppo-eval {run} ({result['params']}, {result['env']}, seed stream PPO_TEST of run seed "
         f"{result['seed']}): {episodes} episodes, return {r.mean():.2f} +- {r.std():.2f} "
         f"(min {r.min():.2f}, max {r.max():.2f}), length {result['lengths'].mean():.1f}")


def register(app: typer.Typer) -> None:
    """Add ``ppo`` and ``ppo-eval`` to ``app``."""
    app.command("ppo")(ppo)
    app.command("ppo-eval")(ppo_eval)
