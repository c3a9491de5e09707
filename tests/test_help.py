"""Every command's --help shows every default (typer's own display), and the defaults it
shows are the configurations' own; --version says which synapto this is."""

from __future__ import annotations

import dataclasses
import re

import pytest
import typer

from synapto import __version__
from synapto.cli import build_app, main


def commands(group=None, prefix=()):
    group = group or typer.main.get_command(build_app([])[0])  # every command
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


def help_text(capsys, monkeypatch, argv) -> str:
    monkeypatch.setenv("COLUMNS", "400")  # one line per option
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def option_line(text: str, opt: str) -> str:
    found = [line for line in text.splitlines() if re.search(rf"^[│\s]*{re.escape(opt)}[\s,]", line)]
    assert found, f"{opt} is not in the help:\n{text}"
    return found[0]


def shown_default(text: str, opt: str) -> str | None:
    m = re.search(r"\[default: (.*?)\]\s*│?\s*$", option_line(text, opt))
    return m and m.group(1)


ALL = list(commands())


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_help_shows_every_default(path, cmd, capsys, monkeypatch):
    text = help_text(capsys, monkeypatch, list(path))
    missing = []
    for p in cmd.params:
        if p.param_type_name != "option" or p.name == "help" or p.show_default is False:
            continue
        if p.is_flag and not p.secondary_opts:  # --force, --check: off unless given
            continue
        if shown_default(text, p.opts[0]) is None:
            missing.append(p.opts[0])
    assert not missing, f"{' '.join(path)} --help shows no default for {missing}"


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


@pytest.mark.parametrize(
    "command,cls", [("evolve", "synapto.evolution.config:EvolveConfig"), ("ppo", "synapto.ppo.config:PPOConfig")]
)
def test_the_defaults_shown_are_the_configs(command, cls, capsys, monkeypatch):
    import importlib

    module, name = cls.split(":")
    config = getattr(importlib.import_module(module), name)
    text = help_text(capsys, monkeypatch, [command])
    # evolve's options change the default experiment (synapto/defaults.toml): its values are the
    # defaults shown, the config's where it sets none
    experiment = {}
    if command == "evolve":
        import tomllib

        from synapto import defaults

        experiment = {k.replace("-", "_"): v for k, v in tomllib.loads(defaults.PATH.read_text()).items()}
    checked = 0
    for f in dataclasses.fields(config):
        if f.default is dataclasses.MISSING or f.default is None or f.name in ("exp_name",):
            continue
        opt = "--" + f.name.replace("_", "-")
        if opt not in text:
            continue
        shown = shown_default(text, opt)
        default = experiment.get(f.name, f.default)
        expected = _shown(default)
        if isinstance(default, bool):
            expected = opt[2:] if default else "no-" + opt[2:]
        assert shown == expected, (opt, shown, expected)
        checked += 1
    assert checked >= (12 if command == "evolve" else 14)


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith(f"synapto {__version__} (Python ")


def test_ppo_check_says_what_would_run_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "p.h5"
    with pytest.raises(SystemExit) as exc:
        main(["ppo", "--env", "CartPole-v1", "--epochs", "3", "--out", str(out), "--check"])
    assert exc.value.code == 0
    said = capsys.readouterr().out
    assert said.startswith("ok: 1 PPO run(s) would run: CartPole-v1") and str(out) in said
    assert list(tmp_path.iterdir()) == []
    out.write_text("x")
    with pytest.raises(SystemExit) as exc:  # what the run refuses, --check refuses
        main(["ppo", "--env", "CartPole-v1", "--out", str(out), "--check"])
    assert exc.value.code == 2 and "exists; pass --force" in capsys.readouterr().err


def test_make_evolve_can_be_run_again():
    import shutil
    import subprocess

    from conftest import ROOT

    make = shutil.which("make")
    assert make, "make is needed for `make test` anyway"
    dry = subprocess.run([make, "-n", "-W", "setup.cfg", "evolve"], cwd=ROOT, capture_output=True, text=True)
    line = [ln for ln in dry.stdout.splitlines() if "synapto evolve" in ln]
    assert line and "--config quickstart" in line[-1] and "--force" in line[-1], dry.stdout
    dry = subprocess.run([make, "-n", "evolve", "FORCE="], cwd=ROOT, capture_output=True, text=True)
    assert "--force" not in [ln for ln in dry.stdout.splitlines() if "synapto evolve" in ln][-1]


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_help_shows_flags_as_flags(path, cmd, capsys, monkeypatch):
    """A flag takes no value: its help line names no type (``<bool>``), other options keep theirs."""
    text = help_text(capsys, monkeypatch, list(path))
    assert "<bool>" not in text
    flags = [p for p in cmd.params if p.param_type_name == "option" and p.is_flag]
    for p in flags:
        assert not re.search(r"<\w+>", option_line(text, p.opts[0])), p.opts[0]
    if len(flags) < len([p for p in cmd.params if p.param_type_name == "option"]):
        assert re.search(r"<(int|float|str|path|list\[\w+\])>", text)  # the other options keep their types
