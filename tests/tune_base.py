"""What the tune tests share: a CartPole base of a few seconds a trial, and ``tune`` run in
this process."""

from __future__ import annotations

import pytest

from synapto.cli import main

#: a CartPole base of a few seconds a trial
TINY = """env = "CartPole-v1"
agent = "pruned-mlp"
hidden = [4]
strategy = "openai-es"
population = 8
generations = 1000
max-env-steps = 2000
episodes = 1
validate-top = 1
validate-episodes = 2
test-episodes = 5
seed = 1
out = "runs/base.h5"

[strategy_options]
sigma = 0.1
lr = 0.03
prune = false
"""


def tune(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(["tune", *map(str, args)])
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def one_line(code, err, needle: str) -> None:
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert needle in err, err
