"""Options declared once (synapto.common.declare): a dataclass's fields make a typer command whose
help, flags and defaults are the declarations', and which hands its parsed values over as
one Request; lists of names are filters over the declarations."""

from __future__ import annotations

from dataclasses import dataclass

import typer
from typer.testing import CliRunner

from synapto.common.declare import Request, command, flag, multi_value_flags, names, opt


@dataclass(frozen=True)
class Train:
    steps: int = opt(10, help="Steps.", panel="The run", config=True, after="env")  # declared first, listed after --env
    env: str = opt("CartPole-v1", help="Gymnasium environment id.", panel="The run", config=True, identity=True)
    hid: tuple[int, ...] = opt((32, 32), help="Hidden sizes.", cli=list[str], shown=["32", "32"], multi=True)
    force: bool = opt(False, help="Overwrite.", flags=("--force",))
    agent_options: dict = opt(factory=dict, help="KEY=VALUE.", name="agent_option", cli=list[str] | None, shown=None)
    plain: int = 3  # no option


def _app(seen: list) -> typer.Typer:
    app = typer.Typer()
    app.command()(command(seen.append, Train))
    app.command("other")(lambda: None)
    return app


def test_the_command_line_is_the_declarations():
    r = CliRunner().invoke(_app([]), ["append", "--help"], env={"COLUMNS": "120"})
    assert r.exit_code == 0
    lines = r.output.splitlines()
    order = [w for line in lines for w in line.split() if w.startswith("--") and w != "--help"]
    assert order == ["--hid", "--force", "--agent-option", "--env", "--steps"]  # The run's panel comes second
    assert "The run" in r.output and "[default: CartPole-v1]" in r.output and "[default: 32, 32]" in r.output
    assert "--plain" not in r.output


def test_the_command_gets_one_request_of_values_and_given_names():
    seen: list[Request] = []
    r = CliRunner().invoke(_app(seen), ["append", "--steps", "5", "--hid", "3", "--agent-option", "a=1"])
    assert r.exit_code == 0, r.output
    (request,) = seen
    assert request.values == {"env": "CartPole-v1", "hid": ["3"], "force": False, "agent_options": ["a=1"], "steps": 5}
    assert request.given == {"steps", "hid", "agent_options"}
    assert request.of(Train, given_only=True) == {"hid": ["3"], "agent_options": ["a=1"], "steps": 5}
    assert request.build(Train, hid=(3,), agent_options={}) == Train(steps=5, hid=(3,))


def test_lists_of_names_are_filters():
    assert names(Train, config=True) == ("env", "steps")
    assert names(Train, identity=True) == ("env",)
    assert multi_value_flags(Train) == {"--hid"}
    assert (flag(Train, "agent_options"), flag(Train, "force"), flag(Train, "steps")) == (
        "--agent-option",
        "--force",
        "--steps",
    )
