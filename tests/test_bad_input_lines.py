"""Bad input that used to reach a traceback: each case is one line `error: ...`, exit code
2, and nothing written -- --check included, which makes no folder either."""

from __future__ import annotations

import os

import pytest

from synapto.cli import main

SMALL = [
    "--agent",
    "pruned-mlp",
    "--hidden",
    "2",
    "--population",
    "4",
    "--generations",
    "1",
    "--episodes",
    "1",
    "--test-episodes",
    "0",
]


def call(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr().err


@pytest.fixture
def files(tmp_path, monkeypatch):
    (tmp_path / "latin1.toml").write_bytes(b'env = "CartPole-v1"\n# caf\xe9\n')
    (tmp_path / "twice.toml").write_text("max_env_steps = 10\nmax-env-steps = 20\n")
    (tmp_path / "raising_on_import.py").write_text("raise RuntimeError('this module cannot be imported')\n")
    (tmp_path / "exiting_on_import.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "exiting_env.py").write_text(
        "import sys\nimport gymnasium\n\n\ndef make():\n    sys.exit(4)\n\n\n"
        "gymnasium.register('Exiting-v0', entry_point=make)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


CASES = [
    (["--env", "LunarLander-v3", "--env-option", "gravity=5.0"], "cannot be made: AssertionError: gravity"),
    (["--env", "CartPole-v1", "--env-option", "sutton_barto_reward=3"], None),  # accepted: a control
    (["--env", "raising_on_import:Foo-v0"], "raised RuntimeError: this module cannot be imported"),
    (["--env", ":Foo-v0"], "no module before ':'"),
    (["--env", "exiting_on_import:Foo-v0"], "importing module 'exiting_on_import' called sys.exit(3)"),
    (["--env", "exiting_env:Exiting-v0"], "cannot be made: it called sys.exit(4)"),
    (["--env", "CartPole-v1", "--config", "{files}/latin1.toml"], "is not UTF-8 text"),
    (["--env", "CartPole-v1", "--config", "{files}/twice.toml"], "sets max_env_steps twice"),
    (["--env", "CartPole-v1", "--task-timeout", "1e12"], "--task-timeout must be a number of seconds in"),
    (["--env", "CartPole-v1", "--strategy-option", "prune_to=1e-9"], "prune_to 1e-09 leaves no connection"),
    (["--env", "CartPole-v1", "--agent-option", "init_prune=1.5"], "agent option init_prune must be in [0, 1)"),
    (
        ["--env", "CartPole-v1", "--agent", "hebbian-dag", "--agent-option", "neuromodulate=no"],
        "agent option neuromodulate must be true or false, got 'no'",
    ),
    (
        [
            "--env",
            "LunarLander-v3",
            "--agent",
            "hebbian-dag",
            "--env-option",
            "train_backend=envpool",
            "--agent-option",
            "neuromodulate=true",
        ],
        "error: env option train_backend=envpool",  # no batched policy (or no envpool extra)
    ),
    (
        [
            "--env",
            "CartPole-v1",
            "--hidden",
            "4",
            "--population",
            "8",
            "--generations",
            "2",
            "--validate-episodes",
            "100000000",
        ],
        "of memory",
    ),
]


@pytest.mark.parametrize("args, needle", CASES)
def test_bad_input_is_one_line_and_writes_nothing(files, capsys, args, needle):
    out = files / "sub" / "r.h5"
    args = [a.format(files=files) for a in args]
    for check in (["--check"], [] if needle else None):
        if check is None:
            continue
        code, err = call(capsys, "evolve", *SMALL, *args, "--out", out, *check)
        if needle is None:
            assert code == 0, err
        else:
            assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err
            assert needle in err, err
        assert not (files / "sub").exists()


@pytest.mark.parametrize("command", [["evolve", *SMALL, "--env", "CartPole-v1"], ["ppo", "--env", "CartPole-v1"]])
def test_check_makes_no_folder(tmp_path, capsys, command):
    code, err = call(capsys, *command, "--out", tmp_path / "a" / "b" / "r.h5", "--check")
    assert code == 0, err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "option, needle", [("xml_file=/no/such.xml", "OSError"), ("frame_skip=0", "ZeroDivisionError")]
)
def test_mujoco_constructor_errors_are_one_line(tmp_path, capsys, option, needle):
    pytest.importorskip("mujoco")
    code, err = call(
        capsys, "evolve", *SMALL, "--env", "Ant-v5", "--env-option", option, "--out", tmp_path / "s" / "r.h5", "--check"
    )
    assert code == 2 and err.startswith("error: --env 'Ant-v5' with --env-option") and needle in err, err
    assert os.listdir(tmp_path) == []
