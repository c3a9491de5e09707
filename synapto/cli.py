"""The command line: the only module that reads argv.

``python -m synapto evolve|replay|ppo|ppo-eval|bench ...``: the typer app, the global
options, and :func:`main`; each command lives with its package and is registered here
(``evolve``: :mod:`synapto.evolution.cli`, ``ppo``: :mod:`synapto.ppo.cli`, ...).  Bad input
raises :class:`synapto.common.errors.UsageError`, printed by :func:`main` as one line
(``error: ...``) with exit code 2.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from synapto import __version__
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
from synapto.common.declare import multi_value_flags
from synapto.common.errors import DiskFullError, TrackingError, UsageError, command_line_names
from synapto.common.logs import setup
from synapto.evolution.cli import register as evolve_register
from synapto.evolution.config import EVOLVE_OPTIONS
from synapto.parallel.launch import announce, env_rank, record_crash, record_exit
from synapto.ppo.cli import MULTI_VALUE_OPTIONS as ppo_multi, register as ppo_register
from synapto.tune.cli import MULTI_VALUE_OPTIONS as tune_multi, register as tune_register
from synapto.viz.cli import register as viz_register

#: -h works as --help, for every command (click hands help_option_names down to subcommands)
HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, context_settings=HELP)
bench_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Benchmarks.")
app.add_typer(bench_app, name="bench")


def expand_multi(argv: list[str], names) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok in names:
            j = i + 1
            while j < len(argv) and not (
                argv[j].startswith("--") or (argv[j].startswith("-") and not _is_number(argv[j]))
            ):
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


def _flags_shown_as_flags() -> None:
    """Help shows a flag as a flag: typer's help column of option types (typer >= 0.2x) says
    ``<bool>`` for ``--force`` and ``--obs-norm/--no-obs-norm``, which take no value; every
    other option keeps its type (``<int>``, ``<path>``)."""
    from typer import core

    option = getattr(core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if option is None or shown is None or getattr(shown, "flags_shown_as_flags", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    display_type_rich.flags_shown_as_flags = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_flags_shown_as_flags()

#: global options that may also stand after the command (``synapto evolve ... -q``)
GLOBAL_FLAGS = {"-v", "--verbose", "-q", "--quiet"}


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"synapto {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit(0)


@app.callback()
def _global(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print synapto's version and exit."),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also print debug lines (timings, the full configuration).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print warnings and errors only.")] = False,
):
    """Distributed, reproducible evolution of pruned and Hebbian networks (synaptolysis).
    -v / -q may also follow the command."""
    setup(1 if verbose else -1 if quiet else 0)


def hoist_global_flags(argv: list[str]) -> list[str]:
    """Move -v/-q from after the command to before it, where the app's callback reads them."""
    flags = [a for a in argv if a in GLOBAL_FLAGS]
    return [*flags, *(a for a in argv if a not in GLOBAL_FLAGS)] if flags else argv


def _register_optional() -> frozenset[str]:
    """Register the commands, from their packages: evolve, bench (learn, compare, envs, nn, evolve, farm, race,
    ppo), ppo, tune, replay, slurm-script, and the pictures (plot, render, draw, export; need the plot extra
    only when run).  Returns the flags of their options that take several space-separated values."""
    evolve_register(app)
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
    evolve_multi = multi_value_flags(*EVOLVE_OPTIONS)
    multi = (evolve_multi, bench_evolve_multi, ppo_multi, bench_ppo_multi, sparsity_multi, race_multi, tune_multi)
    return frozenset({"--backend", "--mode"}).union(*multi)


#: options taking several space-separated values (``--hidden 8 8``); main() rewrites
#: them to click's repeated form (``--hidden 8 --hidden 8``).
MULTI_VALUE_OPTIONS = _register_optional()


def main(argv: list[str] | None = None) -> None:
    announce()  # a rank of a relaunched job: its parent forwards Ctrl-C here
    try:
        _main(argv)
    except SystemExit as exc:
        _finish(exc.code)
        raise
    except BaseException as exc:  # a traceback follows: the parent must not start the job again
        record_crash(exc)
        raise


def _finish(code) -> None:
    """Rank 0's exit code for the parent of a relaunched job; a job with a worker rank that
    stopped answering is ended with MPI_Abort (nothing else can stop that rank)."""
    code = 0 if code is None else code if isinstance(code, int) else 1
    record_exit(code)
    farm = sys.modules.get("synapto.parallel.farm")
    if farm is not None:
        farm.abort_if_abandoned(code)


def dashed(argv: list[str]) -> list[str]:
    """``--steps_per_epoch`` is ``--steps-per-epoch`` (Spinning Up's spellings, for every command)."""
    return [
        a.split("=", 1)[0].replace("_", "-") + a[len(a.split("=", 1)[0]) :] if a.startswith("--") else a for a in argv
    ]


def _main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]  # paths given by the API or tests
    argv = hoist_global_flags(expand_multi(dashed(list(argv)), MULTI_VALUE_OPTIONS))
    try:
        with command_line_names():  # errors name the flags
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
