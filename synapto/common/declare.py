"""Options declared once: a command's options are fields of dataclasses, and the command
line is built from them.

Each option is a dataclass field made by :func:`opt`; its ``metadata["option"]`` (an
:class:`Opt`) carries what the command line and the code around it need to know: the help,
the help panel, the flag(s), the command-line type and default when they differ from the
field's, whether it takes several space-separated values or KEY=VALUE items, whether a
config file may set it, whether it is part of a run's identity.  A field made by plain ``field()`` (or with no
default) is no option.  Declare::

    @dataclass(frozen=True)
    class Train:
        env: str = opt("CartPole-v1", help="Gymnasium environment id.", panel="The run")
        hid: tuple[int, ...] = opt(
            (32, 32), help="Hidden layer sizes.", cli=list[str], shown=["32", "32"], multi=True
        )
        force: bool = opt(False, help="Overwrite the run file.", flags=("--force",))

and build the typer command from one or more such classes::

    def train(request: Request) -> None:
        cfg = request.build(Train)  # or request.values, request.given
        ...

    app.command("train", help="...")(command(train, Train))

:func:`command` gives the function typer registers a signature of ``typer.Option``
parameters, one per option, in the order the classes and their fields are declared (an
option's ``after`` moves it behind another, when options of several classes share a
panel).  The command is called with a :class:`Request`: every option's parsed value by
field name, and the names the command line (or the environment) set.

Lists of names are filters over the declarations: :func:`names` (``names(Train,
identity=True)``, ``names(Train, config=True)``), :func:`multi_value_flags` (the flags
:func:`synapto.cli.main` expands, ``--hid 32 32`` -> ``--hid 32 --hid 32``) and
:func:`flag` (the flag of a field, for error messages).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from typing import Annotated, Any

from synapto.common.options import given_on_command_line

#: the key of a field's metadata that declares it an option
KEY = "option"
#: an :class:`Opt`'s ``shown`` left out: the field's default
FIELDS = object()


@dataclass(frozen=True)
class Opt:
    """How a field appears as an option (see the module's docstring)."""

    help: str
    panel: str | None = None  #: the help panel (typer's ``rich_help_panel``)
    flags: tuple[str, ...] = ()  #: typer's declarations (``"--force"``, ``"--crn/--no-crn"``); () : ``--name``
    name: str | None = None  #: the command-line parameter's name (``agent_option``); None: the field's
    cli: Any = None  #: the command-line type; None: the field's
    shown: Any = FIELDS  #: the command-line default; FIELDS: the field's
    show_default: bool | str = True  #: typer's ``show_default``
    multi: bool = False  #: takes several space-separated values (``--seed 1 2 3``)
    config: bool = False  #: a config file may set it too (the command line's value wins)
    table: bool = False  #: a table of options, given as ``--NAME KEY=VALUE`` (repeatable)
    identity: bool = False  #: part of a run's identity (``--resume`` refuses to change it)
    after: str | None = None  #: listed after this other option (by field name)


def opt(default: Any = MISSING, *, factory: Any = MISSING, **meta: Any) -> Any:
    """A dataclass field that is an option: ``default`` (or ``factory``) as ``field()``'s, the
    rest an :class:`Opt`'s fields."""
    return dataclasses.field(default=default, default_factory=factory, metadata={KEY: Opt(**meta)})


def declared(*classes: type) -> list[tuple[dataclasses.Field, Opt]]:
    """The options of ``classes`` (dataclasses, or instances), in the order they are listed."""
    out = [(f, f.metadata[KEY]) for cls in classes for f in dataclasses.fields(cls) if KEY in f.metadata]
    for f, o in list(out):
        if any(g.name == o.after for g, _ in out):  # (an option of another class: when listed too)
            out.remove((f, o))
            at = next(i for i, (g, _) in enumerate(out) if g.name == o.after)
            out.insert(at + 1, (f, o))
    return out


def names(*classes: type, **where: Any) -> tuple[str, ...]:
    """The field names of the options of ``classes`` whose :class:`Opt` has every attribute
    of ``where`` (``identity=True``)."""
    return tuple(f.name for f, o in declared(*classes) if all(getattr(o, k) == v for k, v in where.items()))


def flag(cls: type, name: str) -> str:
    """The (first) flag of the option ``name`` of ``cls``: ``--agent-option`` of ``agent_options``."""
    o = next(o for f, o in declared(cls) if f.name == name)
    if o.flags:
        return o.flags[0].split("/")[0]
    return "--" + (o.name or name).replace("_", "-")


def multi_value_flags(*classes: type) -> set[str]:
    """The flags of the options that take several space-separated values."""
    return {flag(cls, f.name) for cls in classes for f, o in declared(cls) if o.multi}


@dataclass(frozen=True)
class Request:
    """A command's parsed options: ``values`` by field name, ``given``: the names the
    command line (or the environment) set; the others hold their shown default."""

    values: Mapping[str, Any]
    given: frozenset[str] = frozenset()

    def of(self, *classes: type, given_only: bool = False) -> dict[str, Any]:
        """The values of the options of ``classes`` (``given_only``: those given)."""
        return {
            f.name: self.values[f.name]
            for f, _ in declared(*classes)
            if f.name in self.values and (f.name in self.given or not given_only)
        }

    def build(self, cls: Callable[..., Any], **overrides: Any) -> Any:
        """``cls`` made of its options' values, ``overrides`` winning."""
        return cls(**{**self.of(typing.cast(type, cls)), **overrides})


def parameters(*classes: type) -> list[inspect.Parameter]:
    """The typer parameters of the options of ``classes``: keyword parameters annotated
    ``Annotated[type, typer.Option(...)]`` with their command-line default."""
    import typer

    hints: dict[str, Any] = {}
    for cls in classes:
        hints.update(typing.get_type_hints(cls))
    out = []
    for f, o in declared(*classes):
        kind = o.cli if o.cli is not None else hints[f.name]
        default = o.shown if o.shown is not FIELDS else _default(f)
        option = typer.Option(*o.flags, help=o.help, rich_help_panel=o.panel, show_default=o.show_default)
        out.append(
            inspect.Parameter(
                o.name or f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
            )
        )
    return out


def command(run: Callable[[Request], Any], *classes: type) -> Callable[..., Any]:
    """The function typer registers for ``run``: its parameters are the options of
    ``classes``; typer's call becomes ``run(Request(...))``."""
    import typer

    by_param = {o.name or f.name: f.name for f, o in declared(*classes)}

    def call(ctx: typer.Context, **params: Any) -> Any:
        given = frozenset(by_param[k] for k in given_on_command_line(ctx, params))
        return run(Request({by_param[k]: v for k, v in params.items()}, given))

    params = parameters(*classes)
    ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    call.__signature__ = inspect.Signature([ctx, *params])  # type: ignore[attr-defined]
    call.__annotations__ = {"ctx": typer.Context, **{p.name: p.annotation for p in params}}
    call.__name__ = call.__qualname__ = getattr(run, "__name__", "command")
    call.__doc__ = run.__doc__
    return call


def _default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return ...
