"""The command line: the only module that reads argv.

``python -m synapto evolve|replay|ppo|ppo-eval|bench ...``.  Bad input raises
:class:`synapto.errors.UsageError`, printed by :func:`main` as one line
(``error: ...``) with exit code 2.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from synapto.errors import DiskFullError, TrackingError, UsageError
from synapto.evolution.command import check_task_timeout
from synapto.evolution.config import EvolveConfig
from synapto.logs import say
from synapto.options import STRATEGY_SHORTHANDS, key_values, strategy_options, table
from synapto.parallel.launch import env_rank

#: -h works as --help, for every command (click hands help_option_names down to subcommands)
HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, context_settings=HELP)
bench_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Benchmarks.")
app.add_typer(bench_app, name="bench")

#: options taking several space-separated values (``--hidden 8 8``); main() rewrites
#: them to click's repeated form (``--hidden 8 --hidden 8``).
MULTI_VALUE_OPTIONS = {"--hidden", "--seed", "--workers-list"}


def expand_multi(argv: list[str], names) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok in names:
            j = i + 1
            while j < len(argv) and not (argv[j].startswith("--") or (argv[j].startswith("-") and
                                                                       not _is_number(argv[j]))):
                out += [tok, argv[j]]
                j += 1
            if j == i + 1:
                out.append(tok)  # let click report the missing value
            i = j
        else:
            out.append(tok)
            i += 1
    return out


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


_log = say  # the commands' log lines (synapto.logs)

#: global options that may also stand after the command (``synapto evolve ... -q``)
GLOBAL_FLAGS = {"-v", "--verbose", "-q", "--quiet"}


def _print_version(value: bool) -> None:
    if value:
        from synapto import __version__

        typer.echo(f"synapto {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit(0)


@app.callback()
def _global(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print synapto's version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also print debug lines (timings, the full "
                                                                  "configuration).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print warnings and errors only.")] = False,
):
    """Distributed, reproducible evolution of pruned and Hebbian networks (synaptolysis).
    -v / -q may also follow the command."""
    from synapto.logs import setup

    setup(1 if verbose else -1 if quiet else 0)


def hoist_global_flags(argv: list[str]) -> list[str]:
    """Move -v/-q from after the command to before it, where the app's callback reads them."""
    flags = [a for a in argv if a in GLOBAL_FLAGS]
    return [*flags, *(a for a in argv if a not in GLOBAL_FLAGS)] if flags else argv


# --------------------------------------------------------------------------- evolve

EVOLVE_KEYS = {"env", "env_options", "agent", "population", "generations", "max_env_steps", "hidden", "episodes",
               "seed", "test_episodes", "agent_options", "workers", "out", "crn", "validate_top",
               "validate_episodes", "strategy", "strategy_options", "obs_norm", "select_episodes",
               "task_timeout", *STRATEGY_SHORTHANDS}


def out_for_seed(out: Path, seed: int, n_seeds: int) -> Path:
    if n_seeds <= 1:
        return out
    suffix = out.suffix or ".h5"
    return out.with_name(f"{out.stem}_s{seed}{suffix}")


def given_on_command_line(ctx: typer.Context, names) -> set[str]:
    """The parameters of ``names`` that the command line (or the environment) set: the
    others keep their shown default, and a ``--config`` file's value wins over it."""
    out = set()
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(name)
    return out


def _seeds(value) -> list[int]:
    seeds = value if isinstance(value, (list, tuple)) else [value]
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise UsageError(f"--seed must be one or more integers >= 0, got {value!r}")
    return list(seeds)


def _shown_defaults() -> dict:
    """The defaults evolve's options show: the default experiment's (synapto/defaults.toml),
    EvolveConfig's where it says nothing."""
    from synapto import defaults

    found = {f.name: f.default for f in dataclasses.fields(EvolveConfig)}
    found.update({k: v for k, v in defaults.values(EVOLVE_KEYS).items() if k in found})
    return found


_E = _shown_defaults()
HELP_SECTIONS = {"run": "The run", "search": "Strategy", "choose": "Validation, selection, test",
                 "exec": "Execution", "track": "Tracking"}


#: evolve's help: the paragraphs are joined here (the help formatter keeps a docstring's line breaks)
EVOLVE_HELP = ("Evolve a population on an environment (coordinator + MPI workers).\n\n"
               "It runs the default experiment, synapto/defaults.toml: CMA-ES on a hebbian-dag cut down to "
               "50 % of its connections, LunarLander-v3 within 2.75 M env steps; the defaults shown below are "
               "its values, and the options given change them (a --strategy other than cmaes drops its "
               "strategy options). --config FILE runs another experiment: the keys it leaves out take "
               "EvolveConfig's defaults (docs/strategies.md).")


@app.command(no_args_is_help=False, help=EVOLVE_HELP)
def evolve(
    ctx: typer.Context,
    env: Annotated[str, typer.Option(help="Gymnasium environment id; module:Env-v0 imports module first.",
                                     rich_help_panel=HELP_SECTIONS["run"])] = _E["env"],
    env_option: Annotated[list[str] | None, typer.Option(
        help="A keyword argument of the env's constructor, KEY=VALUE (repeatable), e.g. continuous=true.",
        rich_help_panel=HELP_SECTIONS["run"], show_default=False)] = None,
    agent: Annotated[str, typer.Option(help="pruned-mlp, hebbian-dag, or package.module:Class.",
                                       rich_help_panel=HELP_SECTIONS["run"])] = _E["agent"],
    agent_option: Annotated[list[str] | None, typer.Option(
        help="An agent option, KEY=VALUE (repeatable), e.g. neuromodulate=true (hebbian-dag).",
        rich_help_panel=HELP_SECTIONS["run"], show_default=False)] = None,
    hidden: Annotated[list[int], typer.Option(
        help="Hidden layer sizes, e.g. --hidden 8 8; --hidden 0: none (a linear policy).",
        rich_help_panel=HELP_SECTIONS["run"])] = list(_E["hidden"]),  # noqa: B006
    population: Annotated[int, typer.Option(help="Individuals per generation.",
                                            rich_help_panel=HELP_SECTIONS["run"])] = _E["population"],
    generations: Annotated[int, typer.Option(help="Generations to run (at most, with --max-env-steps).",
                                             rich_help_panel=HELP_SECTIONS["run"])] = _E["generations"],
    max_env_steps: Annotated[int, typer.Option(
        help="Env-step budget of training and validation episodes: the run ends after the generation that "
             "reaches it; 0 for none.", rich_help_panel=HELP_SECTIONS["run"])] = _E["max_env_steps"],
    episodes: Annotated[int, typer.Option(help="Episodes averaged per fitness.",
                                          rich_help_panel=HELP_SECTIONS["run"])] = _E["episodes"],
    seed: Annotated[list[int], typer.Option(help="Run seed(s); several run one after another.",
                                            rich_help_panel=HELP_SECTIONS["run"])] = [_E["seed"]],  # noqa: B006
    config: Annotated[Path | None, typer.Option(
        help="TOML file of options, or the name of a shipped one (quickstart, lunarlander_learn, bipedal_solve, "
             "bipedal_hebbian_dag, bipedal_learn); command-line options override it.",
        rich_help_panel=HELP_SECTIONS["run"], show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        help="Run file (.h5); with several seeds _s<seed> is inserted before .h5.",
        show_default="runs/<env>_<agent>_s<seed>.h5", rich_help_panel=HELP_SECTIONS["run"])] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing run file.",
                                        rich_help_panel=HELP_SECTIONS["run"])] = False,
    resume: Annotated[Path | None, typer.Option(
        help="Continue RUN.h5 from its last checkpoint (any number of ranks). Options that would change "
             "the run are refused; --generations and --max-env-steps may be raised to extend a finished run.",
        rich_help_panel=HELP_SECTIONS["run"], show_default=False)] = None,
    strategy: Annotated[str, typer.Option(
        help="How the next generation is made: ga, openai-es, pgpe, cmaes or ars (docs/strategies.md).",
        rich_help_panel=HELP_SECTIONS["search"])] = _E["strategy"],
    sigma: Annotated[float | None, typer.Option(
        help="openai-es, pgpe, cmaes: (initial) std of the search distribution.",
        show_default="0.1 (the default experiment's cmaes; openai-es, pgpe: 0.1)",
        rich_help_panel=HELP_SECTIONS["search"])] = None,
    lr: Annotated[float | None, typer.Option(
        help="openai-es: Adam's step size on the centre; ars: the step size.", show_default="0.03 (openai-es)",
        rich_help_panel=HELP_SECTIONS["search"])] = None,
    prune: Annotated[str | None, typer.Option(
        help="on: the agent prunes connections between generations (synaptolysis); off: dense.",
        show_default="on", rich_help_panel=HELP_SECTIONS["search"])] = None,
    mutation_std: Annotated[float | None, typer.Option(
        help="ga: std of the Gaussian perturbation of surviving weights; 0 keeps pure pruning.",
        show_default="0.5", rich_help_panel=HELP_SECTIONS["search"])] = None,
    strategy_option: Annotated[list[str] | None, typer.Option(
        help="Any other strategy option, KEY=VALUE (repeatable); docs/strategies.md lists them with defaults.",
        rich_help_panel=HELP_SECTIONS["search"], show_default=False)] = None,
    obs_norm: Annotated[bool, typer.Option(
        "--obs-norm/--no-obs-norm", help="Normalise observations by running statistics of the training "
                                         "episodes, frozen per generation.",
        rich_help_panel=HELP_SECTIONS["search"])] = _E["obs_norm"],
    crn: Annotated[bool, typer.Option(
        "--crn/--no-crn", help="Common random numbers: every individual of a generation gets the same "
                               "training episodes.", rich_help_panel=HELP_SECTIONS["search"])] = _E["crn"],
    validate_top: Annotated[int, typer.Option(
        help="Candidates (top by training fitness) re-evaluated each generation on validation episodes; "
             "0 means the elite count, ceil(population/8).",
        rich_help_panel=HELP_SECTIONS["choose"])] = _E["validate_top"],
    validate_episodes: Annotated[int, typer.Option(
        help="Fresh validation episodes per candidate; the best-ever agent and the hall of fame are chosen "
             "on them. 0 chooses on training fitness, as the reference does.",
        rich_help_panel=HELP_SECTIONS["choose"])] = _E["validate_episodes"],
    select_episodes: Annotated[int, typer.Option(
        help="After the last generation, re-evaluate the strategy's final candidates on this many fresh "
             "episodes and make the best the champion; 0 keeps the strategy's champion.",
        rich_help_panel=HELP_SECTIONS["choose"])] = _E["select_episodes"],
    test_episodes: Annotated[int, typer.Option(
        help="Episodes of the final champion test; 0 skips it.",
        rich_help_panel=HELP_SECTIONS["choose"])] = _E["test_episodes"],
    workers: Annotated[int, typer.Option(
        help="Worker processes: relaunch under `mpiexec -n N+1` (ignored when already under MPI). "
             "0 runs in this process.", rich_help_panel=HELP_SECTIONS["exec"])] = 0,
    on_error: Annotated[str, typer.Option(
        help="abort: an evaluation that raises stops the run (checkpoint kept, replay command printed); "
             "skip: that individual gets fitness -inf and the run goes on.",
        rich_help_panel=HELP_SECTIONS["exec"])] = "abort",
    checkpoint_every: Annotated[int, typer.Option(help="Generations between checkpoints.",
                                                  rich_help_panel=HELP_SECTIONS["exec"])] = 1,
    schedule: Annotated[str, typer.Option(
        help="dynamic: a worker gets its next individual as soon as it is free; waves: the reference's "
             "blocking waves (one individual per worker, all wait for the slowest). Results are identical.",
        rich_help_panel=HELP_SECTIONS["exec"])] = "dynamic",
    batch: Annotated[str, typer.Option(
        help="auto: where the env has a numpy-batched implementation (e.g. CartPole-v1) and the agent a "
             "batched policy, evaluate chunks of individuals x episodes in lockstep; off: one env at a time.",
        rich_help_panel=HELP_SECTIONS["exec"])] = "auto",
    wire: Annotated[str, typer.Option(
        help="keys: for openai-es, pgpe and separable cmaes, workers get each generation's centre once and "
             "a task carries only its sample's noise key; genomes: every task carries its genome. Results "
             "are identical.", rich_help_panel=HELP_SECTIONS["exec"])] = "keys",
    task_timeout: Annotated[float | None, typer.Option(
        help="Seconds an evaluation task may take (one individual, or a chunk of them under --batch); "
             "one that overruns fails as if it raised (see --on-error). A worker rank that stops "
             "answering gets no more tasks; the MPI job then ends with MPI_Abort.", show_default="off",
        rich_help_panel=HELP_SECTIONS["exec"])] = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Check the options, the config and the output path, print what would run, and exit "
                        "without running or writing anything.", rich_help_panel=HELP_SECTIONS["exec"])] = False,
    tensorboard: Annotated[Path | None, typer.Option(
        help="Write every generation's statistics as TensorBoard scalars into this folder "
             "(needs the tensorboard extra).", show_default="off", rich_help_panel=HELP_SECTIONS["track"])] = None,
    live_log: Annotated[Path | None, typer.Option(
        help="Append every generation's statistics to this file as it runs: .csv (a header, one row per "
             "generation) or .jsonl (one JSON object per generation).", show_default="off",
        rich_help_panel=HELP_SECTIONS["track"])] = None,
):
    """Evolve a population on an environment (coordinator + MPI workers)."""
    from synapto.config import load_toml
    from synapto.evolution.command import check_runs, resume_evolution, run_on_farm, tracking_callbacks
    from synapto.evolution.loop import RunOptions
    from synapto.parallel.launch import relaunch, under_mpi

    params = dict(env=env, agent=agent, population=population, generations=generations,
                  max_env_steps=max_env_steps, hidden=hidden, episodes=episodes, seed=seed,
                  test_episodes=test_episodes, workers=workers, out=out, crn=crn, validate_top=validate_top,
                  validate_episodes=validate_episodes, strategy=strategy, sigma=sigma, lr=lr, prune=prune,
                  mutation_std=mutation_std, obs_norm=obs_norm, select_episodes=select_episodes,
                  task_timeout=task_timeout)
    given = {k: params[k] for k in given_on_command_line(ctx, params)}
    from synapto import defaults

    default_run = (config is None and resume is None and not strategy_option and not agent_option
                   and not env_option and not set(given) - {"seed", "workers", "out"})
    if config is not None:
        values = load_toml(config, EVOLVE_KEYS)
    elif resume is None:  # the default experiment (synapto/defaults.py), changed by the options given
        values = defaults.values(EVOLVE_KEYS)
        if given.get("strategy", values["strategy"]) != values["strategy"]:
            values.pop("strategy_options")  # the default strategy's options
    else:
        values = {}
    file_values = dict(values)
    values.update(given)
    if list(values.get("hidden", ())) == [0]:
        values["hidden"] = ()  # --hidden 0: no hidden layer
    opts = strategy_options(values, strategy_option)
    if opts:
        values["strategy_options"] = opts
    for key, option, items in (("agent_options", "--agent-option", agent_option),
                               ("env_options", "--env-option", env_option)):
        found = {**table(values, key), **key_values(option, items)}
        if found:
            values[key] = found
    seeds = _seeds(values.pop("seed", [0]))
    n_workers = values.pop("workers", 0)
    out_path = values.pop("out", None)
    if out_path is not None and not isinstance(out_path, (str, Path)):
        raise UsageError(f"--out must be a file path, got {out_path!r}")
    task_timeout = check_task_timeout(values.pop("task_timeout", None))
    if schedule not in ("dynamic", "waves"):
        raise UsageError(f"--schedule must be 'dynamic' or 'waves', got {schedule!r}")
    if on_error not in ("abort", "skip"):
        raise UsageError(f"--on-error must be 'abort' or 'skip', got {on_error!r}")
    if checkpoint_every < 1:
        raise UsageError(f"--checkpoint-every must be >= 1, got {checkpoint_every}")
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0:
        raise UsageError(f"--workers must be an integer >= 0, got {n_workers!r}")
    if batch not in ("auto", "off"):
        raise UsageError(f"--batch must be 'auto' or 'off', got {batch!r}")
    if wire not in ("keys", "genomes"):
        raise UsageError(f"--wire must be 'keys' or 'genomes', got {wire!r}")
    callbacks = tracking_callbacks(tensorboard, live_log, len(seeds))
    options = RunOptions(schedule=schedule, on_error=on_error, checkpoint_every=checkpoint_every, batch=batch,
                         wire=wire)
    if resume is not None:
        if "out" not in given and out_path is not None:
            raise UsageError(f"--config {config} sets out = {str(out_path)!r}, but --resume continues RUN.h5 in "
                             f"place: resume without --config (the run file holds its config)")
        if out_path is not None or force:
            raise UsageError("--resume continues RUN.h5 in place; --out/--force cannot be used with it")
        resume_evolution(resume, values, given_seeds=None if "seed" not in given and "seed" not in file_values
                         else seeds, n_workers=n_workers, options=options, task_timeout=task_timeout,
                         check=check, callbacks=callbacks)
        return
    try:
        configs = [EvolveConfig(**values, seed=s) for s in seeds]
    except TypeError as exc:
        raise UsageError(f"bad option value: {exc}") from None
    first = configs[0]
    if out_path is None:
        out_path = Path("runs") / f"{first.env.replace('/', '_').replace(':', '_')}_{first.agent.split(':')[-1]}.h5"
        outs = [out_for_seed(out_path, c.seed, 2) for c in configs]
    else:
        outs = [out_for_seed(Path(out_path), c.seed, len(configs)) for c in configs]
    if len(set(outs)) != len(outs):
        raise UsageError(f"--seed has repeated values {seeds}")

    first_agent = check_runs(configs, outs, force)  # everything we can, before starting processes
    if default_run and env_rank() == 0:
        say(defaults.describe(first, n_workers))
    if check:
        from synapto.evolution.progress import Budget

        ranks = f"{n_workers} worker(s), {n_workers + 1} MPI ranks" if n_workers else "no workers (this process)"
        say(f"ok: {len(configs)} run(s): {first.strategy} on {first.env}, {first.agent} {list(first.hidden)} "
            f"({first_agent.n_params:,} parameters), population {first.population} -> {', '.join(map(str, outs))}\n"
            f"budget: {Budget(first.generations, first.max_env_steps).describe()}; {ranks}; "
            f"{defaults.estimate(first, n_workers)}")
        return

    if n_workers > 0 and not under_mpi():
        relaunch(n_workers + 1)

    run_on_farm([(cfg, o, False) for cfg, o in zip(configs, outs)], options, force, task_timeout,
                callbacks=callbacks)


def _register_optional() -> None:
    """Commands of the other packages: bench (learn, compare, envs, nn, evolve, farm, race, ppo), ppo, and the
    pictures (plot, render, draw, export; need the plot extra only when run)."""
    from synapto.bench.compare import register as compare_register
    from synapto.bench.envs import register as envs_register
    from synapto.bench.evolve import MULTI_VALUE_OPTIONS as bench_evolve_multi, register as bench_evolve_register
    from synapto.bench.farm import register as farm_register
    from synapto.bench.learn import register as learn_register
    from synapto.bench.nn import register as nn_register
    from synapto.bench.ppo import MULTI_VALUE_OPTIONS as bench_ppo_multi, register as bench_ppo_register
    from synapto.bench.race import MULTI_VALUE_OPTIONS as race_multi, register as race_register
    from synapto.bench.sparsity import MULTI_VALUE_OPTIONS as sparsity_multi, register as sparsity_register
    from synapto.commands import register as commands_register
    from synapto.ppo.cli import MULTI_VALUE_OPTIONS as ppo_multi, register as ppo_register
    from synapto.tune.cli import MULTI_VALUE_OPTIONS as tune_multi, register as tune_register
    from synapto.viz.cli import register as viz_register

    envs_register(bench_app)
    nn_register(bench_app)
    learn_register(bench_app)
    compare_register(bench_app)
    sparsity_register(bench_app)
    bench_evolve_register(bench_app)
    farm_register(bench_app)
    race_register(bench_app)
    viz_register(app)
    ppo_register(app)
    bench_ppo_register(bench_app)
    tune_register(app)
    commands_register(app)
    MULTI_VALUE_OPTIONS.update({"--backend", "--mode", *bench_evolve_multi, *ppo_multi, *bench_ppo_multi,
                                *sparsity_multi, *race_multi, *tune_multi})


_register_optional()


def main(argv: list[str] | None = None) -> None:
    from synapto.parallel.launch import announce

    announce()  # a rank of a relaunched job: its parent forwards Ctrl-C here
    try:
        _main(argv)
    except SystemExit as exc:
        _finish(exc.code)
        raise


def _finish(code) -> None:
    """Rank 0's exit code for the parent of a relaunched job; a job with a worker rank that
    stopped answering is ended with MPI_Abort (nothing else can stop that rank)."""
    from synapto.parallel.launch import record_exit

    code = 0 if code is None else code if isinstance(code, int) else 1
    record_exit(code)
    farm = sys.modules.get("synapto.parallel.farm")
    if farm is not None:
        farm.abort_if_abandoned(code)


def dashed(argv: list[str]) -> list[str]:
    """``--steps_per_epoch`` is ``--steps-per-epoch`` (Spinning Up's spellings, for every command)."""
    return [a.split("=", 1)[0].replace("_", "-") + a[len(a.split("=", 1)[0]):] if a.startswith("--") else a
            for a in argv]


def _main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]  # paths given by the API or tests
    argv = hoist_global_flags(expand_multi(dashed(list(argv)), MULTI_VALUE_OPTIONS))
    try:
        rc = app(args=argv, prog_name="synapto", standalone_mode=False)
    except UsageError as exc:
        if env_rank() == 0:
            sys.stderr.write(exc.report() if isinstance(exc, TrackingError) else f"error: {exc}\n")
        sys.exit(2)
    except DiskFullError as exc:
        if env_rank() == 0:
            sys.stderr.write(exc.report())
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        # typer may vendor click: find its exception base class by name.
        click_exc = tuple(c for c in type(typer.BadParameter("")).__mro__ if c.__name__ == "ClickException")
        if click_exc and isinstance(exc, click_exc):
            click_error: Any = exc  # a ClickException (its class found by name above): it has format_message()
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.stderr.write(click_error.format_message() + "\n")
            elif env_rank() == 0:
                sys.stderr.write(f"error: {click_error.format_message()}\n")
            sys.exit(2)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)
