"""Config files' values that used to reach a traceback or be taken silently: ``hidden`` as
one number, a config that is not a path, a run file's path that is not a string."""

from __future__ import annotations

import pytest

import synapto
from synapto.cli import main
from synapto.common.errors import UsageError
from synapto.ppo.config import PPOConfig
from synapto.tune.base import load_base, trial_config

BASE = 'env = "CartPole-v1"\nagent = "pruned-mlp"\nstrategy = "openai-es"\npopulation = 8\n'


def call(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr()


@pytest.mark.parametrize("value, layers", [("8", (8,)), ("[8]", (8,)), ("0", ()), ("[0]", ()), ("[3, 2]", (3, 2))])
def test_hidden_as_one_number_is_one_hidden_layer_everywhere(tmp_path, capsys, value, layers):
    """``hidden = 8`` is ``--hidden 8``: the command line, ``from_toml`` and a study's base agree."""
    path = tmp_path / "c.toml"
    path.write_text(BASE + f"hidden = {value}\n")
    assert synapto.EvolveConfig.from_toml(path).hidden == layers
    assert trial_config(load_base(path), seed=1).hidden == layers
    code, out = call(capsys, "evolve", "--config", path, "--out", tmp_path / "r.h5", "--check")
    assert code == 0, out.err
    assert f"pruned-mlp {list(layers)} " in out.err + out.out


@pytest.mark.parametrize("value", ["8.5", "true", '"8"', "-3", "[4, 0]"])
def test_a_hidden_that_is_no_layer_sizes_is_one_line(tmp_path, capsys, value):
    path = tmp_path / "c.toml"
    path.write_text(BASE + f"hidden = {value}\n")
    code, out = call(capsys, "evolve", "--config", path, "--out", tmp_path / "r.h5", "--check")
    assert code == 2 and out.err.startswith("error: --hidden must be positive integers"), out.err
    assert len(out.err.splitlines()) == 1, out.err
    with pytest.raises(UsageError, match=r"^hidden must be positive integers"):  # Python names the field
        synapto.EvolveConfig.from_toml(path)
    with pytest.raises(UsageError, match="hidden must be positive integers"):
        trial_config(load_base(path), seed=1)


@pytest.mark.parametrize("path", [None, 3, b"c.toml"])
def test_from_toml_of_something_not_a_path_is_a_usage_error(path):
    with pytest.raises(UsageError, match="a config is a TOML file's path or a shipped config's name"):
        synapto.EvolveConfig.from_toml(path)
    with pytest.raises(UsageError, match="a config is a TOML file's path or a shipped config's name"):
        PPOConfig.from_toml(path)


@pytest.mark.parametrize("value", ["5", "true", '""', "[1]"])
@pytest.mark.parametrize("command", ["evolve", "ppo"])
def test_a_config_whose_out_is_no_path_is_refused_even_when_out_is_given(tmp_path, capsys, command, value):
    """A bad ``out`` in the file is the file's error, whether or not ``--out`` overrides it."""
    path = tmp_path / "c.toml"
    path.write_text((BASE + "hidden = [4]\n" if command == "evolve" else 'env = "CartPole-v1"\n') + f"out = {value}\n")
    for given in ([], ["--out", tmp_path / "r.h5"]):
        code, out = call(capsys, command, "--config", path, *given, "--check")
        assert code == 2 and len(out.err.splitlines()) == 1, out.err
        assert out.err.startswith(f"error: --config {str(path)!r} sets out = "), out.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]
