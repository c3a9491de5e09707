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
from synapto.common.declare import multi_value_flags
from synapto.common.errors import DiskFullError, TrackingError, UsageError, command_line_names
from synapto.common.logs import setup
from synapto.parallel.launch import announce, env_rank, record_crash, record_exit

#: -h works as --help, for every command (click hands help_option_names down to subcommands)
HELP = {"help_option_names": ["-h", "--help"]}


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


# Each command's module loads when that command runs (or for the list of commands): a process,
# each MPI rank included, loads the options and the work of its own command only.
def _evolve(app: typer.Typer, bench_app: typer.Typer) -> frozenset[str]:
    from synapto.evolution.cli import register
    from synapto.evolution.config import EVOLVE_OPTIONS

    register(app)
    return frozenset(multi_value_flags(*EVOLVE_OPTIONS))


def _bench(app: typer.Typer, bench_app: typer.Typer) -> frozenset[str]:
    from synapto.bench import compare, envs, evolve, farm, learn, nn, ppo, race, sparsity

    for module in (envs, nn, learn, compare, sparsity, evolve, farm, race, ppo):
        module.register(bench_app)
    multi = (evolve, ppo, sparsity, race)
    return frozenset({"--backend", "--mode"}).union(*(m.MULTI_VALUE_OPTIONS for m in multi))


def _viz(app: typer.Typer, bench_app: typer.Typer) -> frozenset[str]:
    from synapto.viz.cli import register

    register(app)
    return frozenset()


def _ppo(app: typer.Typer, bench_app: typer.Typer) -> frozenset[str]:
    from synapto.ppo.cli import MULTI_VALUE_OPTIONS, register

    register(app)
    return frozenset(MULTI_VALUE_OPTIONS)


def _tune(app: typer.Typer, bench_app: typer.Typer) -> frozenset[str]:
    from synapto.tune.cli import MULTI_VALUE_OPTIONS, register

    register(app)
    return frozenset(MULTI_VALUE_OPTIONS)


def _commands(app: typer.Typer, bench_app: typer.Typer) -> frozenset[str]:
    from synapto.commands import register

    register(app)
    return frozenset()


#: the commands by name, each with the function that registers it, in the order of the help
COMMANDS = (
    (("evolve",), _evolve),
    (("bench",), _bench),
    (("plot", "render", "draw", "export"), _viz),
    (("ppo", "ppo-eval"), _ppo),
    (("tune",), _tune),
    (("replay", "show", "slurm-script"), _commands),
)


def build_app(argv: list[str]) -> tuple[typer.Typer, frozenset[str]]:
    """The app for ``argv``: its command alone, or every command (no command, an unknown one)
    for the list; and the flags of their options that take several space-separated values
    (``--hidden 8 8``), which :func:`_main` rewrites to click's repeated form."""
    app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, context_settings=HELP)
    bench_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Benchmarks.")
    app.add_typer(bench_app, name="bench")
    app.callback()(_global)
    name = next((a for a in argv if not a.startswith("-")), None)
    chosen = [add for names, add in COMMANDS if name in names] or [add for _, add in COMMANDS]
    return app, frozenset().union(*(add(app, bench_app) for add in chosen))


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
    argv = dashed(list(argv))
    app, multi = build_app(argv)
    argv = hoist_global_flags(expand_multi(argv, multi))
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
