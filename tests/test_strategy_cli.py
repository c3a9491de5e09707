"""Choosing a strategy on the command line and in TOML: options reach it, bad input is
one line and exit 2 with nothing written."""

from __future__ import annotations

import numpy as np
import pytest

from synapto.cli import main
from synapto.common.errors import UsageError
from synapto.store import RunData


def cli(capsys, *args):
    """``synapto <args>`` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


TINY = [
    "evolve",
    "--env",
    "CartPole-v1",
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
    "--validate-episodes",
    "0",
    "--test-episodes",
    "0",
]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--strategy", "nope"], "--strategy 'nope' is unknown: expected one of ga, openai-es, pgpe, cmaes"),
        (["--strategy", "ga", "--sigma", "0.1"], "strategy 'ga' has no option(s) sigma"),
        (["--strategy", "cmaes", "--lr", "0.1"], "strategy 'cmaes' has no option(s) lr"),
        (["--strategy", "openai-es", "--mutation-std", "0.1"], "strategy 'openai-es' has no option(s) mutation_std"),
        (["--strategy", "pgpe", "--strategy-option", "bogus=1"], "strategy 'pgpe' has no option(s) bogus"),
        (["--strategy", "openai-es", "--sigma", "0"], "sigma must be a number in (0, 1e+06], got 0"),
        (["--strategy", "pgpe", "--sigma", "-1"], "sigma must be a number in (0, 1e+06], got -1"),
        (["--strategy", "cmaes", "--sigma", "nan"], "sigma must be a number in (0, 1e+06]"),
        (["--strategy", "openai-es", "--sigma", "1e308"], "sigma must be a number in (0, 1e+06], got 1e+308"),
        (["--strategy", "openai-es", "--lr", "1e308"], "lr must be a number in (0, 1e+06], got 1e+308"),
        (["--strategy", "pgpe", "--sigma", "1e308"], "sigma must be a number in (0, 1e+06]"),
        (["--strategy", "cmaes", "--sigma", "1e308"], "sigma must be a number in (0, 1e+06]"),
        (["--strategy", "ga", "--mutation-std", "1e308"], "--mutation-std must be a number in [0, 1e+06], got 1e+308"),
        (["--strategy", "openai-es", "--population", "5"], "needs an even population"),
        (["--strategy", "pgpe", "--population", "7"], "needs an even population"),
        (["--strategy", "cmaes", "--population", "0"], "--population must be an integer >= 2, got 0"),
        (["--strategy", "openai-es", "--prune", "maybe"], "--prune must be 'on' or 'off', got 'maybe'"),
        (["--strategy-option", "noequals"], "--strategy-option expects KEY=VALUE, got 'noequals'"),
        (["--strategy", "ga", "--prune", "off", "--mutation-std", "0"], "would never change a genome"),
        (["--select-episodes", "-1"], "--select-episodes must be an integer >= 0, got -1"),
        (["--strategy", "ars", "--population", "5"], "needs an even population"),
        (
            ["--strategy", "ars", "--strategy-option", "top=3"],
            "top must be at most the number of directions, population / 2 = 2, got 3",
        ),
        (["--strategy", "ars", "--strategy-option", "top=-1"], "top must be an integer >= 0, got -1"),
        (["--strategy", "ars", "--lr", "0"], "lr must be a number in (0, 1e+06], got 0"),
        (["--strategy", "ars", "--strategy-option", "momentum=0.9"], "strategy 'ars' has no option(s) momentum"),
        (["--env-option", "reward_shift=x"], "env option reward_shift must be a finite number in -1e6..1e6, got 'x'"),
        (["--env-option", "max_episode_steps=-5"], "env option max_episode_steps must be an integer >= 0, got -5"),
        (["--env-option", "time_limit=5"], "--env-option {'time_limit': 5}: CartPole-v1's constructor refuses them"),
        (["--env-option", "oops"], "--env-option expects KEY=VALUE, got 'oops'"),
        (["--hidden", "0", "3"], "--hidden must be positive integers"),
    ],
)
def test_bad_strategy_input_is_one_line_and_exit_2(capsys, tmp_path, args, needle):
    out = tmp_path / "run.h5"
    code, _, err = cli(capsys, *TINY, *args, "--out", out)
    assert code == 2 and needle in err, err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_options_reach_the_strategy_from_flags_toml_and_key_value(capsys, tmp_path):
    toml = tmp_path / "es.toml"
    toml.write_text(
        'strategy = "openai-es"\nsigma = 0.2\nobs-norm = true\nselect-episodes = 2\n'
        "[strategy_options]\nlr = 0.01\nweight_decay = 0.0\n"
    )
    out = tmp_path / "run.h5"
    code, _, err = cli(
        capsys,
        *TINY,
        "--config",
        toml,
        "--lr",
        "0.02",
        "--strategy-option",
        "sigma_decay=0.99",
        "--prune",
        "off",
        "--out",
        out,
    )
    assert code == 0, err
    with RunData(out) as run:
        cfg = run.config
    assert cfg["strategy"] == "openai-es" and cfg["obs_norm"] is True and cfg["select_episodes"] == 2
    # the table, then the top-level shorthand, then the command line
    assert cfg["strategy_options"] == {
        "lr": 0.02,
        "weight_decay": 0.0,
        "sigma": 0.2,
        "sigma_decay": 0.99,
        "prune": False,
    }


def test_resume_takes_the_run_s_own_strategy_options(capsys, tmp_path):
    """--resume with no strategy options continues the run as it was configured; a
    different option is refused naming it."""
    out = tmp_path / "run.h5"
    code, _, err = cli(capsys, *TINY, "--strategy", "pgpe", "--sigma", "0.3", "--out", out)
    assert code == 0, err
    code, _, err = cli(capsys, "evolve", "--resume", out, "--generations", "2")
    assert code == 0, err
    with RunData(out) as run:
        assert run.completed == 2
    code, _, err = cli(capsys, "evolve", "--resume", out, "--generations", "3", "--sigma", "0.5")
    assert code == 2 and "strategy_options" in err and "refuses" in err, err


def test_older_run_files_read_as_ga_runs():
    """A format-1 config (GA only, mutation_std at the top level) parses as strategy ga."""
    from synapto.evolution.config import EvolveConfig

    cfg = EvolveConfig.from_json(
        '{"env": "CartPole-v1", "agent": "pruned-mlp", "population": 8, "mutation_std": 0.25, "hidden": [4]}'
    )
    assert cfg.strategy == "ga" and cfg.options["mutation_std"] == 0.25 and cfg.options["prune"] is True


def test_ask_tell_api_continues_exactly_from_its_state():
    import synapto

    cfg = synapto.EvolveConfig(env="CartPole-v1", agent="pruned-mlp", hidden=(4,))
    agent = synapto.build_agent(cfg)
    a = synapto.AskTell(agent, "openai-es", population=6, seed=2, sigma=0.2)
    fit = lambda g: -np.sum((g - 0.3) ** 2, axis=1)  # noqa: E731
    for _ in range(3):
        a.tell(fit(a.ask()))
    b = synapto.AskTell.from_state(a.state(), agent, "openai-es", 6, sigma=0.2)
    for _ in range(3):
        x, y = a.ask(), b.ask()
        assert np.array_equal(x, y)
        a.tell(fit(x))
        b.tell(fit(y))
    assert a.champion.fitness == b.champion.fitness
    with pytest.raises(UsageError):
        a.tell([1.0, 2.0])


def test_an_env_step_budget_ends_the_run_and_can_be_raised(capsys, tmp_path):
    out = tmp_path / "run.h5"
    code, _, err = cli(
        capsys,
        *TINY[:-6],
        "--generations",
        "50",
        "--max-env-steps",
        "400",
        "--test-episodes",
        "2",
        "--validate-episodes",
        "2",
        "--out",
        out,
    )
    assert code == 0, err
    with RunData(out) as run:
        done = run.completed
        spent = run.stats("env_steps") + run.stats("validation_env_steps")
    assert 1 <= done < 50 and spent[-1] >= 400 and (done == 1 or spent[-2] < 400)
    code, log, _ = cli(capsys, "evolve", "--resume", out)
    assert code == 0 and "is finished" in log
    code, _, err = cli(capsys, "evolve", "--resume", out, "--max-env-steps", "2000")
    assert code == 0, err
    with RunData(out) as run:
        assert run.completed > done and run.tested
