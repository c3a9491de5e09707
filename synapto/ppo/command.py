"""What ``ppo`` does once its options are read (:func:`ppo_command`), as
:mod:`synapto.evolution.command` does for ``evolve``: the configs (the command line's
values over a config file's, or a run file's on ``--resume``), every check made before
a process starts or a file is written, the relaunch under MPI, and the runs
(:func:`synapto.ppo.train.train`, which checks nothing of this again).

Bad input raises :class:`synapto.common.errors.UsageError` (one line, exit 2, printed by
:func:`synapto.cli.main`).
"""

from __future__ import annotations

import dataclasses
import os
from itertools import pairwise
from pathlib import Path

import numpy as np

from synapto.common.declare import Request, names
from synapto.common.errors import UsageError
from synapto.common.logs import say as _log
from synapto.common.options import agree, check_distinct, out_for_seed
from synapto.common.shell import next_lines, synapto_command
from synapto.envs import space_info
from synapto.parallel.launch import start_ranks, under_mpi, world
from synapto.ppo.config import (
    PPOConfig,
    RunOptions,
    build_config,
    load_ppo_toml,
    parse_hid,
    safe_name,
)
from synapto.ppo.progress import log_dir
from synapto.ppo.threads import update_threads
from synapto.ppo.train import local_envs, train
from synapto.resources import check_memory as check_need, ppo_memory
from synapto.store import PPORun, check_output_path, check_writable
from synapto.tracking.writers import tracking_callbacks


def ppo_command(request: Request) -> None:
    """``synapto ppo``: ``request`` holds its parsed options (:mod:`synapto.ppo.cli`)."""
    opts = request.values
    given = {k: opts[k] for k in names(PPOConfig, RunOptions, config=True) if k in request.given}
    if "hid" in given:
        given["hid"] = parse_hid(given["hid"])
    cpu = opts["cpu"] if "cpu" in request.given else None
    if cpu is not None and (isinstance(cpu, bool) or cpu < 1):
        raise UsageError(f"--cpu must be an integer >= 1, got {cpu!r}")
    update_threads()  # a bad $SYNAPTO_PPO_THREADS stops here, before anything starts
    callbacks = tracking_callbacks(opts["tensorboard"], opts["live_log"])  # one report per epoch
    resume, force = opts["resume"], opts["force"]
    n_procs: int | None  # None: as many processes as the MPI world has
    if resume is not None:
        configs, outs, n_procs = resumed_run(resume, given, opts["config"], cpu)
    else:
        configs, outs, n_procs = new_runs(opts["config"], given, cpu)
    comm, rank, size = processes(n_procs)
    check_runs(configs, size, comm is not None)
    if resume is None:
        agree(comm, rank, lambda: check_new_outputs(outs, force))
    else:
        agree(comm, rank, lambda: check_writable(resume))
    if opts["check"]:
        if rank == 0:
            what = "resumes" if resume is not None else "would run"
            _log(
                f"ok: {len(configs)} PPO run(s) {what}: {configs[0].env}, hid {list(configs[0].hid)}, "
                f"{configs[0].epochs} epochs of {configs[0].steps_per_epoch:,} steps on {size} process(es) -> "
                f"{', '.join(map(str, outs))}"
            )
        return
    if size > 1 and comm is None:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        start_ranks(size)
    for cfg, o in zip(configs, outs):
        if train(cfg, o, comm, resume=resume is not None, force=force, log=_log, callbacks=callbacks) is not None:
            _log(next_steps(o))


def next_steps(out: Path) -> str:
    """What a PPO run wrote and the commands that look at it, as they run from a fresh shell."""
    stem = Path(out).with_suffix("")
    return next_lines(
        ("run file", out),
        ("progress.txt", f"{log_dir(out) / 'progress.txt'} (Spinning Up's columns; config.json beside it)"),
        ("learning curves", synapto_command("plot", out, "--out", f"{stem}_curves.png")),
        ("the policy", synapto_command("render", out, "--out", f"{stem}_policy.gif")),
    )


def resumed_run(resume: Path, given: dict, config, cpu: int | None) -> tuple[list, list[Path], int]:
    """``([config], [run file], ranks)`` of ``--resume``: the run file's config with only
    ``--epochs`` changed, checked against what the run file holds."""
    extra = sorted(set(given) - {"epochs"}) + (["config"] if config is not None else [])
    if extra:
        raise UsageError(
            f"--resume continues the run as it was configured; drop "
            f"{', '.join('--' + k.replace('_', '-') for k in extra)} (only --epochs and --cpu may change)"
        )
    with PPORun(resume) as run:
        run.verify()  # damaged data is refused here, before anything is rewritten
        stored, ranks, completed = run.parse_config(PPOConfig.from_json), run.ranks, run.completed
        untested = stored.test_episodes > 0 and run.policy_test() is None  # stopped during its final test
    cfg = dataclasses.replace(stored, epochs=given.get("epochs", stored.epochs))
    if cfg.epochs != stored.epochs and stored.lr_schedule != "constant":
        raise UsageError(
            f"--epochs: {str(resume)!r} runs a {stored.lr_schedule} learning-rate schedule over "
            f"its {stored.epochs} epochs; another number of epochs would change every epoch's rate"
        )
    if cpu is not None and cpu != ranks:
        raise UsageError(
            f"--cpu {cpu}: {str(resume)!r} was run with {ranks} process(es); "
            f"resume it with --cpu {ranks} to continue it bit-identically"
        )
    if completed >= cfg.epochs and not untested:
        raise UsageError(
            f"{str(resume)!r} has completed all {completed} epochs; pass --epochs N > {completed} to continue it"
        )
    if completed < 1:
        raise UsageError(f"{str(resume)!r} has no completed epoch to resume from; start it again with --force")
    return [cfg], [Path(resume)], ranks


def new_runs(config, given: dict, cpu: int | None) -> tuple[list, list[Path], int | None]:
    """``(configs, run files, processes)`` of new runs: one per seed, the command line's
    values over the ``--config`` file's; processes None when neither says."""
    values = load_ppo_toml(config) if config is not None else {}
    values.update(given)
    seeds = values.pop("seed", [0])
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    if not seeds:
        raise UsageError("--seed needs at least one value")
    check_distinct(seeds)
    toml_cpu = values.pop("cpu", None)
    n_procs = cpu if cpu is not None else toml_cpu
    if n_procs is not None and (not isinstance(n_procs, int) or isinstance(n_procs, bool) or n_procs < 1):
        raise UsageError(f"cpu must be an integer >= 1, got {n_procs!r}")
    out_path = values.pop("out", None)
    configs = [build_config({**values, "seed": s}) for s in seeds]
    return configs, outputs(out_path, configs), n_procs


def outputs(out: Path | None, configs) -> list[Path]:
    """The run files: ``--out`` (``_s<seed>`` inserted for several seeds), else
    ``runs/ppo_<env>_s<seed>.h5``."""
    if out is None:
        return [Path("runs") / f"ppo_{safe_name(c.env)}_s{c.seed}.h5" for c in configs]
    out = Path(out)
    if out.suffix != ".h5":
        raise UsageError(f"--out {str(out)!r} must end in .h5 (progress.txt goes in the folder of the same name)")
    return [out_for_seed(out, c.seed, len(configs)) for c in configs]


def processes(n_procs: int | None):
    """``(comm, rank, size)``: this MPI world's (which must have ``n_procs`` ranks when that is
    given), or ``(None, 0, n_procs or 1)`` before the relaunch."""
    if not under_mpi():
        return None, 0, n_procs or 1
    comm, rank, size = world()
    if n_procs is not None and n_procs != size:
        raise UsageError(f"--cpu {n_procs} but this MPI world has {size} process(es); pass --cpu {size} or drop --cpu")
    return comm, rank, size


def check_runs(configs, size: int, under_mpi: bool) -> None:
    """Every check of PPO runs on ``size`` processes that needs no file: each process's
    share of an epoch's steps and envs, the env, and the memory."""
    for cfg in configs:
        if cfg.steps_per_epoch < size:
            raise UsageError(
                f"--steps-per-epoch {cfg.steps_per_epoch} is smaller than the number of "
                f"processes ({size}); each process needs at least one step"
            )
        local_envs(cfg.n_envs, size)  # --n-envs must split evenly over the processes
    space = space_info(configs[0].env)  # a bad --env fails here, once, before any process starts
    for cfg in configs:
        check_memory(cfg, space, size, under_mpi)


def check_new_outputs(outs: list[Path], force: bool) -> None:
    """New runs' files (run file, progress.txt, its folder): refused where they exist, unless ``force``."""
    for o in outs:
        check_output_path(o, force)
        progress = log_dir(o) / "progress.txt"
        if progress.exists() and not force:
            raise UsageError(f"--out {str(o)!r}: {str(progress)!r} exists; pass --force to overwrite it")
        if log_dir(o).exists() and not log_dir(o).is_dir():
            raise UsageError(f"--out {str(o)!r}: {str(log_dir(o))!r} exists and is not a folder")


def check_memory(cfg, space, size: int, under_mpi: bool) -> None:
    """Refuse (exit 2, before anything is written) a run whose epoch buffers and networks
    cannot fit this machine's memory (every rank of a local relaunch counts)."""

    def count(sizes):
        return sum((a + 1) * b for a, b in pairwise(sizes))

    hid = [int(h) for h in cfg.hid]
    n_params = count([space.obs_dim, *hid, space.act_dim]) + count([space.obs_dim, *hid, 1])
    local = int(os.environ.get("MPI_LOCALNRANKS", "1")) if under_mpi else size
    need = ppo_memory(
        cfg.steps_per_epoch // size, local, space.obs_dim, space.act_dim, hid, n_params, np.dtype(cfg.dtype).itemsize
    )
    check_need(need, f"ppo with {cfg.steps_per_epoch:,} steps per epoch over {size} process(es) and hidden sizes {hid}")
