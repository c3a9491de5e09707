"""The command line: the only module that reads argv.

``python -m synapto evolve|replay|ppo|ppo-eval|bench ...``.  Bad input raises
:class:`synapto.errors.UsageError`, printed by :func:`main` as one line
(``error: ...``) with exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from synapto.errors import DiskFullError, UsageError
from synapto.parallel.launch import env_rank

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Distributed, reproducible evolution of pruned and Hebbian networks (synaptolysis).")
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


def _log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- evolve
#: strategy options that have a command-line flag (and a top-level TOML key) of their own
STRATEGY_SHORTHANDS = ("sigma", "lr", "prune", "mutation_std")
EVOLVE_KEYS = {"env", "agent", "population", "generations", "max_env_steps", "hidden", "episodes", "seed",
               "test_episodes", "agent_options", "workers", "out", "crn", "validate_top",
               "validate_episodes", "strategy", "strategy_options", "obs_norm", "select_episodes",
               "task_timeout",
               *STRATEGY_SHORTHANDS}


def strategy_options(values: dict, extra: list[str] | None) -> dict:
    """Pop the strategy's options out of ``values`` (a TOML ``[strategy_options]`` table,
    then the shorthand keys, then ``--strategy-option KEY=VALUE``, later ones winning)."""
    opts = values.pop("strategy_options", {})
    if not isinstance(opts, dict):
        raise UsageError(f"strategy_options must be a table of option = value, got {opts!r}")
    opts = dict(opts)
    for key in STRATEGY_SHORTHANDS:
        if key in values:
            opts[key] = values.pop(key)
    for item in extra or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--strategy-option expects KEY=VALUE, got {item!r}")
        opts[key.strip().replace("-", "_")] = _literal(text.strip())
    if "prune" in opts and isinstance(opts["prune"], str):
        word = opts["prune"].lower()
        if word not in ("on", "off"):
            raise UsageError(f"--prune must be 'on' or 'off', got {opts['prune']!r}")
        opts["prune"] = word == "on"
    return opts


def _literal(text: str):
    """A TOML literal (number, true/false, quoted string), else the text itself."""
    from synapto.config import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def out_for_seed(out: Path, seed: int, n_seeds: int) -> Path:
    if n_seeds <= 1:
        return out
    suffix = out.suffix or ".h5"
    return out.with_name(f"{out.stem}_s{seed}{suffix}")


@app.command(no_args_is_help=False)
def evolve(
    env: Annotated[Optional[str], typer.Option(help="Gymnasium environment id. [default: BipedalWalker-v3]")] = None,
    agent: Annotated[Optional[str], typer.Option(
        help="pruned-mlp, hebbian-dag, or package.module:Class. [default: hebbian-dag]")] = None,
    population: Annotated[Optional[int], typer.Option(help="Individuals per generation. [default: 64]")] = None,
    generations: Annotated[Optional[int], typer.Option(help="Generations to run. [default: 100]")] = None,
    max_env_steps: Annotated[Optional[int], typer.Option(
        help="Env-step budget of training and validation episodes: the run ends after the generation that "
             "reaches it; 0 for none. [default: 0]")] = None,
    hidden: Annotated[Optional[list[int]], typer.Option(
        help="Hidden layer sizes, e.g. --hidden 8 8. [default: 8 8]")] = None,
    episodes: Annotated[Optional[int], typer.Option(help="Episodes averaged per fitness. [default: 4]")] = None,
    seed: Annotated[Optional[list[int]], typer.Option(
        help="Run seed(s); several run one after another. [default: 0]")] = None,
    workers: Annotated[Optional[int], typer.Option(
        help="Worker processes: relaunch under `mpiexec -n N+1` (ignored when already under MPI). "
             "0 runs in this process. [default: 0]")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML file of options (see experiments/); "
                                                      "command-line options override it.")] = None,
    test_episodes: Annotated[Optional[int], typer.Option(
        help="Episodes of the final champion test; 0 skips it. [default: 100]")] = None,
    out: Annotated[Optional[Path], typer.Option(
        help="Run file (.h5); with several seeds _s<seed> is inserted before .h5. "
             "[default: runs/<env>_<agent>_s<seed>.h5]")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing run file.")] = False,
    crn: Annotated[Optional[bool], typer.Option(
        "--crn/--no-crn", help="Common random numbers: every individual of a generation gets the same "
                               "training episodes. [default: --crn]")] = None,
    validate_top: Annotated[Optional[int], typer.Option(
        help="Candidates (top by training fitness) re-evaluated each generation on validation episodes; "
             "0 means the elite count, ceil(population/8). [default: 0]")] = None,
    validate_episodes: Annotated[Optional[int], typer.Option(
        help="Fresh validation episodes per candidate; the best-ever agent and the hall of fame are chosen "
             "on them. 0 chooses on training fitness, as the reference does. [default: 16]")] = None,
    strategy: Annotated[Optional[str], typer.Option(
        help="How the next generation is made: ga, openai-es, pgpe or cmaes (docs/strategies.md). "
             "[default: ga]")] = None,
    sigma: Annotated[Optional[float], typer.Option(
        help="openai-es, pgpe, cmaes: (initial) std of the search distribution.")] = None,
    lr: Annotated[Optional[float], typer.Option(help="openai-es: Adam's step size on the centre.")]
        = None,
    prune: Annotated[Optional[str], typer.Option(
        help="on: the agent prunes connections between generations (synaptolysis); off: dense. "
             "[default: on]")] = None,
    mutation_std: Annotated[Optional[float], typer.Option(
        help="ga: std of the Gaussian perturbation of surviving weights; 0 keeps pure pruning. [default: 0.5]")]
        = None,
    strategy_option: Annotated[Optional[list[str]], typer.Option(
        help="Any other strategy option, KEY=VALUE (repeatable); see docs/strategies.md.")] = None,
    obs_norm: Annotated[Optional[bool], typer.Option(
        "--obs-norm/--no-obs-norm", help="Normalise observations by running statistics of the training "
                                         "episodes, frozen per generation. [default: --no-obs-norm]")] = None,
    select_episodes: Annotated[Optional[int], typer.Option(
        help="After the last generation, re-evaluate the strategy's final candidates on this many fresh "
             "episodes and make the best the champion; 0 keeps the strategy's champion. [default: 0]")] = None,
    resume: Annotated[Optional[Path], typer.Option(
        help="Continue RUN.h5 from its last checkpoint (any number of ranks). Options that would change "
             "the run are refused; --generations may be raised to extend a finished run.")] = None,
    on_error: Annotated[str, typer.Option(
        help="abort: an evaluation that raises stops the run (checkpoint kept, replay command printed); "
             "skip: that individual gets fitness -inf and the run goes on.")] = "abort",
    checkpoint_every: Annotated[int, typer.Option(help="Generations between checkpoints.")] = 1,
    schedule: Annotated[str, typer.Option(
        help="dynamic: a worker gets its next individual as soon as it is free; waves: the reference's "
             "blocking waves (one individual per worker, all wait for the slowest). Results are identical.")]
        = "dynamic",
    batch: Annotated[str, typer.Option(
        help="auto: where the env has a numpy-batched implementation (e.g. CartPole-v1) and the agent a "
             "batched policy, evaluate chunks of individuals x episodes in lockstep; off: one env at a time.")]
        = "auto",
    task_timeout: Annotated[Optional[float], typer.Option(
        help="Seconds an evaluation task may take (one individual, or a chunk of them under --batch); "
             "one that overruns fails as if it raised (see --on-error). A worker rank that stops "
             "answering gets no more tasks; the MPI job then ends with MPI_Abort. [default: off]")] = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Check the options, the config and the output path, print what would run, and exit "
                        "without running or writing anything.")] = False,
):
    """Evolve a population on an environment (coordinator + MPI workers).

    With no run options (only --seed, --workers, --out, --force, --check) it runs the default experiment, synapto/defaults.toml: CMA-ES on a hebbian-dag cut down to 25 % of its connections, LunarLander-v3 within 3 M env steps. The defaults shown below apply as soon as any run option or --config is given."""  # noqa: E501
    from synapto.config import EvolveConfig, load_toml
    from synapto.evolve_command import check_evolve_memory, resume_evolution, run_on_farm
    from synapto.parallel.launch import relaunch, under_mpi
    from synapto.store import check_output_path

    from synapto.evolution.loop import RunOptions

    given = dict(env=env, agent=agent, population=population, generations=generations,
                 max_env_steps=max_env_steps, hidden=hidden,
                 episodes=episodes, seed=seed, test_episodes=test_episodes, workers=workers, out=out,
                 crn=crn, validate_top=validate_top, validate_episodes=validate_episodes,
                 strategy=strategy, sigma=sigma, lr=lr, prune=prune, mutation_std=mutation_std,
                 obs_norm=obs_norm, select_episodes=select_episodes)
    default_run = (config is None and resume is None and not strategy_option
                   and all(v is None for k, v in given.items() if k not in ("seed", "workers", "out")))
    if default_run:  # no run options: the default experiment (synapto/defaults.py)
        from synapto import defaults

        config = defaults.PATH
    values = load_toml(config, EVOLVE_KEYS) if config is not None else {}
    file_values = dict(values)
    values.update({k: v for k, v in given.items() if v is not None})
    opts = strategy_options(values, strategy_option)
    if opts:
        values["strategy_options"] = opts
    seeds = values.pop("seed", [0])
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    n_workers = values.pop("workers", 0)
    out_path = values.pop("out", None)
    file_timeout = values.pop("task_timeout", None)
    task_timeout = check_task_timeout(task_timeout if task_timeout is not None else file_timeout)
    if not seeds:
        raise UsageError("--seed needs at least one value")
    if schedule not in ("dynamic", "waves"):
        raise UsageError(f"--schedule must be 'dynamic' or 'waves', got {schedule!r}")
    if on_error not in ("abort", "skip"):
        raise UsageError(f"--on-error must be 'abort' or 'skip', got {on_error!r}")
    if checkpoint_every < 1:
        raise UsageError(f"--checkpoint-every must be >= 1, got {checkpoint_every}")
    if not isinstance(n_workers, int) or n_workers < 0:
        raise UsageError(f"--workers must be an integer >= 0, got {n_workers!r}")
    if batch not in ("auto", "off"):
        raise UsageError(f"--batch must be 'auto' or 'off', got {batch!r}")
    options = RunOptions(schedule=schedule, on_error=on_error, checkpoint_every=checkpoint_every, batch=batch)
    if resume is not None:
        if out_path is not None or force:
            raise UsageError("--resume continues RUN.h5 in place; --out/--force cannot be used with it")
        resume_evolution(resume, values, given_seeds=None if seed is None and "seed" not in file_values
                         else seeds, n_workers=n_workers, options=options, task_timeout=task_timeout,
                         check=check)
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

    # Check everything we can before starting processes.
    from synapto.agents import build_agent

    agent = build_agent(first)
    check_strategy_agent(first, agent)
    check_evolve_memory(configs, agent.n_params)
    if env_rank() == 0:
        for o in outs:
            check_output_path(o, force)
    if default_run and env_rank() == 0:
        _log(defaults.describe(first, n_workers))
    if check:
        _log(f"ok: {len(configs)} run(s): {first.strategy} on {first.env}, {first.agent} {list(first.hidden)} "
             f"({agent.n_params:,} parameters), population {first.population} -> {', '.join(map(str, outs))}")
        return

    if n_workers > 0 and not under_mpi():
        relaunch(n_workers + 1)

    run_on_farm([(cfg, o, False) for cfg, o in zip(configs, outs)], options, force, task_timeout)


def check_strategy_agent(cfg, agent) -> None:
    """Refuse options the strategy cannot serve with this agent (pruning by trace without
    traces): the strategy is built once, not started."""
    import numpy as np

    from synapto.evolution.strategies import make_strategy

    make_strategy(cfg, agent, np.random.default_rng(0))


def check_task_timeout(value) -> float | None:
    """``--task-timeout`` / ``task_timeout``: None (off) or a finite number of seconds > 0."""
    import math

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise UsageError(f"--task-timeout must be a number of seconds > 0, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- replay
@app.command()
def replay(
    run: Annotated[Path, typer.Argument(help="Run file (.h5) written by `synapto evolve`.")],
    generation: Annotated[Optional[int], typer.Option(help="Generation of the evaluation to replay.")] = None,
    individual: Annotated[Optional[int], typer.Option(help="Individual (index) to replay.")] = None,
    sample: Annotated[Optional[int], typer.Option(
        help="Replay K evaluations drawn at random across generations and individuals.")] = None,
    sample_seed: Annotated[int, typer.Option(help="Seed of the --sample choice (printed).")] = 0,
    validation: Annotated[bool, typer.Option(
        help="Replay validation evaluations (fresh episodes of the top candidates) instead of training ones.")]
        = False,
    workers: Annotated[int, typer.Option(help="Worker processes (relaunch under mpiexec -n N+1).")] = 0,
):
    """Re-run stored evaluations and check they are bit-identical (exit 0) or not (exit 1)."""
    from synapto.parallel.launch import relaunch, under_mpi
    from synapto.replay import plan_replay, run_replay

    plan = plan_replay(run, generation, individual, sample, sample_seed, validation)
    if workers > 0 and not under_mpi():
        relaunch(workers + 1)
    from synapto.parallel.farm import make_farm

    farm, coordinator = make_farm()
    if not coordinator:
        return
    try:
        ok = run_replay(plan, farm, log=_log)
    finally:
        farm.close()
    raise typer.Exit(0 if ok else 1)


def _register_optional() -> None:
    """Commands of the other packages: bench (learn, envs, nn, evolve, ppo), ppo, and the
    pictures (plot, render, draw, export; need the plot extra only when run)."""
    from synapto.bench.envs import register as envs_register
    from synapto.bench.evolve import MULTI_VALUE_OPTIONS as bench_evolve_multi, register as bench_evolve_register
    from synapto.bench.learn import register as learn_register
    from synapto.bench.nn import register as nn_register
    from synapto.bench.sparsity import MULTI_VALUE_OPTIONS as sparsity_multi, register as sparsity_register
    from synapto.bench.ppo import MULTI_VALUE_OPTIONS as bench_ppo_multi, register as bench_ppo_register
    from synapto.ppo.cli import MULTI_VALUE_OPTIONS as ppo_multi, register as ppo_register
    from synapto.viz.cli import register as viz_register

    envs_register(bench_app)
    nn_register(bench_app)
    learn_register(bench_app)
    sparsity_register(bench_app)
    bench_evolve_register(bench_app)
    viz_register(app)
    ppo_register(app)
    bench_ppo_register(bench_app)
    MULTI_VALUE_OPTIONS.update({"--backend", "--mode", *bench_evolve_multi, *ppo_multi, *bench_ppo_multi,
                                *sparsity_multi})


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


def _main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    argv = expand_multi(list(argv), MULTI_VALUE_OPTIONS)
    try:
        rc = app(args=argv, prog_name="synapto", standalone_mode=False)
    except UsageError as exc:
        if env_rank() == 0:
            sys.stderr.write(f"error: {exc}\n")
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
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.stderr.write(exc.format_message() + "\n")
            elif env_rank() == 0:
                sys.stderr.write(f"error: {exc.format_message()}\n")
            sys.exit(2)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)
