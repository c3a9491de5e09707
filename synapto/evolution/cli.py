"""The ``evolve`` command: its options (the help shows the default experiment's values,
:mod:`synapto.defaults`), handed to :func:`synapto.evolution.command.evolve_command`, which
does the rest.  Registered on synapto's app by :func:`register`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from synapto.evolution.config import EVOLVE_KEYS, EvolveConfig


def _shown_defaults() -> dict:
    """The defaults evolve's options show: the default experiment's (synapto/defaults.toml,
    EvolveConfig's defaults too), EvolveConfig's where it says nothing."""
    from synapto import defaults

    found = {f.name: f.default for f in dataclasses.fields(EvolveConfig)}
    found.update({k: v for k, v in defaults.values(EVOLVE_KEYS).items() if k in found})
    return found


_E = _shown_defaults()
_HIDDEN = [str(h) for h in _E["hidden"]]  #: --hidden's default, as typer shows it
HELP_SECTIONS = {
    "run": "The run",
    "search": "Strategy",
    "choose": "Validation, selection, test",
    "exec": "Execution",
    "track": "Tracking",
}


#: evolve's help: the paragraphs are joined here (the help formatter keeps a docstring's line breaks)
EVOLVE_HELP = (
    "Evolve a population on an environment (coordinator + MPI workers).\n\n"
    "It runs the default experiment, synapto/defaults.toml: CMA-ES on a hebbian-dag cut down to "
    "50 % of its connections, LunarLander-v3 within 2.75 M env steps; the defaults shown below are "
    "its values, and the options given change them (a --strategy other than cmaes drops its "
    "strategy options). --config FILE changes it as options do: the keys a file leaves out take its values, "
    "as EvolveConfig's defaults do (docs/configs.md)."
)


def evolve(
    ctx: typer.Context,
    env: Annotated[
        str,
        typer.Option(
            help="Gymnasium environment id; module:Env-v0 imports module first.", rich_help_panel=HELP_SECTIONS["run"]
        ),
    ] = _E["env"],
    env_option: Annotated[
        list[str] | None,
        typer.Option(
            help="A keyword argument of the env's constructor, KEY=VALUE (repeatable), e.g. continuous=true.",
            rich_help_panel=HELP_SECTIONS["run"],
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str,
        typer.Option(help="pruned-mlp, hebbian-dag, or package.module:Class.", rich_help_panel=HELP_SECTIONS["run"]),
    ] = _E["agent"],
    agent_option: Annotated[
        list[str] | None,
        typer.Option(
            help="An agent option, KEY=VALUE (repeatable), e.g. neuromodulate=true (hebbian-dag).",
            rich_help_panel=HELP_SECTIONS["run"],
            show_default=False,
        ),
    ] = None,
    hidden: Annotated[
        list[str],
        typer.Option(
            help='Hidden layer sizes: --hidden 8 8, --hidden 8,8 or --hidden "[8,8]" (as ppo --hid); '
            "--hidden 0: none (a linear policy).",
            rich_help_panel=HELP_SECTIONS["run"],
        ),
    ] = _HIDDEN,
    population: Annotated[
        int, typer.Option(help="Individuals per generation.", rich_help_panel=HELP_SECTIONS["run"])
    ] = _E["population"],
    population_per_worker: Annotated[
        int | None,
        typer.Option(
            help="Individuals per generation per worker, instead of --population: the population is this times "
            "the workers (times 1 in a serial run), resolved once at the start and recorded in the run file.",
            show_default="off",
            rich_help_panel=HELP_SECTIONS["run"],
        ),
    ] = None,
    generations: Annotated[
        int,
        typer.Option(help="Generations to run (at most, with --max-env-steps).", rich_help_panel=HELP_SECTIONS["run"]),
    ] = _E["generations"],
    max_env_steps: Annotated[
        int,
        typer.Option(
            help="Env-step budget of training and validation episodes: the run ends after the generation that "
            "reaches it; 0 for none.",
            rich_help_panel=HELP_SECTIONS["run"],
        ),
    ] = _E["max_env_steps"],
    episodes: Annotated[
        int, typer.Option(help="Episodes averaged per fitness.", rich_help_panel=HELP_SECTIONS["run"])
    ] = _E["episodes"],
    seed: Annotated[
        list[int],
        typer.Option(help="Run seed(s); several run one after another.", rich_help_panel=HELP_SECTIONS["run"]),
    ] = [_E["seed"]],  # noqa: B006
    config: Annotated[
        Path | None,
        typer.Option(
            help="TOML file of options, or the name of a shipped one (quickstart, lunarlander_learn, bipedal_solve, "
            "bipedal_hebbian_dag, bipedal_learn); command-line options override it.",
            rich_help_panel=HELP_SECTIONS["run"],
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Run file (.h5); with several seeds _s<seed> is inserted before .h5.",
            show_default="runs/<env>_<agent>_s<seed>.h5",
            rich_help_panel=HELP_SECTIONS["run"],
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite an existing run file.", rich_help_panel=HELP_SECTIONS["run"])
    ] = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Continue RUN.h5 from its last checkpoint (any number of ranks). Options that would change "
            "the run are refused; --generations and --max-env-steps set a new budget: raise them to extend a "
            "run (a finished one too), or give a lower --max-env-steps to end it sooner (at or below the env "
            "steps it holds, it goes straight to its final selection and test).",
            rich_help_panel=HELP_SECTIONS["run"],
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        str,
        typer.Option(
            help="How the next generation is made: ga, openai-es, pgpe, cmaes or ars (docs/strategies.md).",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = _E["strategy"],
    sigma: Annotated[
        float | None,
        typer.Option(
            help="openai-es, pgpe, cmaes: (initial) std of the search distribution.",
            show_default="0.1 (the default experiment's cmaes; openai-es, pgpe: 0.1)",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = None,
    lr: Annotated[
        float | None,
        typer.Option(
            help="openai-es: Adam's step size on the centre; ars: the step size.",
            show_default="0.03 (openai-es)",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = None,
    prune: Annotated[
        str | None,
        typer.Option(
            help="on: the agent prunes connections between generations (synaptolysis); off: dense.",
            show_default="on",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = None,
    mutation_std: Annotated[
        float | None,
        typer.Option(
            help="ga: std of the Gaussian perturbation of surviving weights; 0 keeps pure pruning.",
            show_default="0.5",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = None,
    strategy_option: Annotated[
        list[str] | None,
        typer.Option(
            help="Any other strategy option, KEY=VALUE (repeatable); docs/strategies.md lists them with defaults.",
            rich_help_panel=HELP_SECTIONS["search"],
            show_default=False,
        ),
    ] = None,
    obs_norm: Annotated[
        bool,
        typer.Option(
            "--obs-norm/--no-obs-norm",
            help="Normalise observations by running statistics of the training episodes, frozen per generation.",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = _E["obs_norm"],
    crn: Annotated[
        bool,
        typer.Option(
            "--crn/--no-crn",
            help="Common random numbers: every individual of a generation gets the same training episodes.",
            rich_help_panel=HELP_SECTIONS["search"],
        ),
    ] = _E["crn"],
    validate_top: Annotated[
        int,
        typer.Option(
            help="Candidates (top by training fitness) re-evaluated each generation on validation episodes; "
            "0 means the elite count, ceil(population/8).",
            rich_help_panel=HELP_SECTIONS["choose"],
        ),
    ] = _E["validate_top"],
    validate_episodes: Annotated[
        int,
        typer.Option(
            help="Fresh validation episodes per candidate; the best-ever agent and the hall of fame are chosen "
            "on them. 0 chooses on training fitness, as the reference does.",
            rich_help_panel=HELP_SECTIONS["choose"],
        ),
    ] = _E["validate_episodes"],
    select_episodes: Annotated[
        int,
        typer.Option(
            help="After the last generation, re-evaluate the strategy's final candidates on this many fresh "
            "episodes and make the best the champion; 0 keeps the strategy's champion.",
            rich_help_panel=HELP_SECTIONS["choose"],
        ),
    ] = _E["select_episodes"],
    test_episodes: Annotated[
        int,
        typer.Option(help="Episodes of the final champion test; 0 skips it.", rich_help_panel=HELP_SECTIONS["choose"]),
    ] = _E["test_episodes"],
    workers: Annotated[
        int,
        typer.Option(
            help="Worker processes: relaunch under `mpiexec -n N+1` (ignored when already under MPI). "
            "0 runs in this process.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = 0,
    restarts: Annotated[
        int,
        typer.Option(
            help="With --workers (and the Slurm script): when a rank is lost (killed, a segfault, a node gone), "
            "start the job again, continuing the run from its last checkpoint, at most this many times; "
            "the run file is the uninterrupted run's. 0: the job stops and prints the resume command. "
            "Never for bad input, an evaluation that raises, or a signal.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = 3,
    on_error: Annotated[
        str,
        typer.Option(
            help="abort: an evaluation that raises stops the run (checkpoint kept, replay command printed); "
            "skip: that individual gets fitness -inf and the run goes on.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = "abort",
    checkpoint_every: Annotated[
        int, typer.Option(help="Generations between checkpoints.", rich_help_panel=HELP_SECTIONS["exec"])
    ] = 1,
    schedule: Annotated[
        str,
        typer.Option(
            help="dynamic: a worker gets its next individual as soon as it is free; waves: the reference's "
            "blocking waves (one individual per worker, all wait for the slowest). Results are identical.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = "dynamic",
    batch: Annotated[
        str,
        typer.Option(
            help="auto: where the env has a numpy-batched implementation (e.g. CartPole-v1) and the agent a "
            "batched policy, evaluate chunks of individuals x episodes in lockstep; off: one env at a time.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = "auto",
    wire: Annotated[
        str,
        typer.Option(
            help="keys: for openai-es, pgpe and separable cmaes, workers get each generation's centre once and "
            "a task carries only its sample's noise key; genomes: every task carries its genome. Results "
            "are identical.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = "keys",
    task_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds an evaluation task may take (one individual, or a chunk of them under --batch); "
            "one that overruns fails as if it raised (see --on-error). A worker rank that stops "
            "answering gets no more tasks; the MPI job then ends with MPI_Abort.",
            show_default="off",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Check the options, the config and the output path, print what would run, and exit "
            "without running or writing anything.",
            rich_help_panel=HELP_SECTIONS["exec"],
        ),
    ] = False,
    tensorboard: Annotated[
        Path | None,
        typer.Option(
            help="Write every generation's statistics as TensorBoard scalars into this folder, stepped by env "
            "steps (run/generation: the generation; needs the tensorboard extra).",
            show_default="off",
            rich_help_panel=HELP_SECTIONS["track"],
        ),
    ] = None,
    live_log: Annotated[
        Path | None,
        typer.Option(
            help="Append every generation's statistics to this file as it runs: .csv (a header, one row per "
            "generation) or .jsonl (one JSON object per generation).",
            show_default="off",
            rich_help_panel=HELP_SECTIONS["track"],
        ),
    ] = None,
):
    """Evolve a population on an environment (coordinator + MPI workers)."""
    from synapto.evolution.command import evolve_command

    evolve_command(ctx, dict(locals()))


def register(app: typer.Typer) -> None:
    """Add ``evolve`` to ``app``."""
    app.command(no_args_is_help=False, help=EVOLVE_HELP)(evolve)
