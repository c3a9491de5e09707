"""The ``evolve`` command: its options are declared once, as the fields of
:data:`synapto.evolution.config.EVOLVE_OPTIONS` (the help shows the default experiment's
values, :mod:`synapto.defaults`, which are :class:`EvolveConfig`'s defaults), and handed as one
:class:`synapto.common.declare.Request` to :func:`synapto.evolution.command.evolve_command`, which
does the rest.  Registered on synapto's app by :func:`register`."""

from __future__ import annotations

import typer

from synapto.common.declare import Request, command

#: evolve's help: the paragraphs are joined here (the help formatter keeps a docstring's line breaks)
EVOLVE_HELP = (
    "Evolve a population on an environment (coordinator + MPI workers).\n\n"
    "It runs the default experiment, synapto/defaults.toml: CMA-ES on a hebbian-dag cut down to "
    "50 % of its connections, LunarLander-v3 within 2.75 M env steps; the defaults shown below are "
    "its values, and the options given change them (a --strategy other than cmaes drops its "
    "strategy options). --config FILE changes it as options do: the keys a file leaves out take its values, "
    "as EvolveConfig's defaults do (docs/configs.md)."
)


def evolve(request: Request) -> None:
    """Evolve a population on an environment (coordinator + MPI workers)."""
    from synapto.evolution.command import evolve_command

    evolve_command(request)


def register(app: typer.Typer) -> None:
    """Add ``evolve`` to ``app``."""
    from synapto.evolution.config import EVOLVE_OPTIONS

    app.command(no_args_is_help=False, help=EVOLVE_HELP)(command(evolve, *EVOLVE_OPTIONS))
