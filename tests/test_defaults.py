"""The default experiment: `evolve` with no run options runs synapto/defaults.toml, a
pruned (synaptolytic) setting that fits the 3 M env-step budget it was tuned for, and
says how long it expects to take; options given change it (one set of defaults)."""

import numpy as np
import pytest
from conftest import ROOT, run_cli

from synapto import defaults
from synapto.agents import build_agent
from synapto.common.config import load_toml
from synapto.evolution.config import EVOLVE_KEYS, EvolveConfig, strategy_options
from synapto.evolution.strategies import make_strategy
from synapto.evolution.strategies.prune import Schedule


def _config(path) -> EvolveConfig:
    values = load_toml(path, EVOLVE_KEYS)
    for key in ("out", "workers"):
        values.pop(key, None)
    values["strategy_options"] = strategy_options(values, None)
    return EvolveConfig(**values)


def test_the_default_experiment_parses_and_is_checked():
    """It is a valid config whose strategy accepts its agent; it prunes to a target that
    the schedule reaches well before the budget ends; training, validation and the final
    selection fit in 3 M env steps (LunarLander-v3 episodes last at most 1000 steps)."""
    cfg = _config(defaults.PATH)
    agent = build_agent(cfg)
    strategy = make_strategy(cfg, agent, np.random.default_rng(0))
    assert cfg.env == "LunarLander-v3" and cfg.agent == "hebbian-dag" == EvolveConfig().agent
    schedule = Schedule.of(agent, cfg.options)
    assert schedule is not None and strategy.schedule == schedule and schedule.final < agent.n_params
    assert schedule.end <= 100  # the runs it was tuned with went past 110 generations in this budget
    selection = cfg.select_episodes * 5 * 1000  # at most 5 final candidates
    assert cfg.max_env_steps + selection <= 3_000_000 and cfg.test_episodes == 100


def test_the_default_experiment_is_the_shipped_hebbian_config():
    """experiments/lunarlander_hebbian.toml runs the same experiment (apart from its seed)."""
    ours, shipped = _config(defaults.PATH), _config(ROOT / "experiments" / "lunarlander_hebbian.toml")
    assert ours.differences(shipped, [n for n in EvolveConfig.IDENTITY if n != "seed"]) == []
    assert (ours.max_env_steps, ours.generations, ours.test_episodes) == (
        shipped.max_env_steps,
        shipped.generations,
        shipped.test_episodes,
    )


@pytest.mark.parametrize("extra", [[], ["--seed", "3", "--workers", "2"]])
def test_evolve_without_run_options_runs_the_default_experiment(tmp_path, extra):
    out = tmp_path / "d.h5"
    r = run_cli("evolve", *extra, "--out", out, "--check")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()[:2]
    cfg = _config(defaults.PATH)
    workers = 2 if extra else 1
    minutes = int(np.ceil(defaults.expected_seconds(cfg, workers) / 60))
    assert first.startswith("no run options: the default experiment (defaults.toml)")
    assert f"expect about {minutes} min with {workers} core(s)" in first
    assert "cmaes on LunarLander-v3, hebbian-dag [8, 8]" in second or cfg.strategy in second
    assert not out.exists()


def test_run_options_change_the_default_experiment(tmp_path, capsys):
    """One set of defaults: --generations 2 runs two generations of the default experiment
    (not a GA on BipedalWalker); --help shows its values; --check shows the budget, the
    workers a config gives and the time estimate with the cores it assumes."""
    from synapto.cli import main

    def check(*args):
        with pytest.raises(SystemExit) as exc:
            main(["evolve", *map(str, args), "--out", str(tmp_path / "r.h5"), "--check"])
        out = capsys.readouterr()
        assert exc.value.code == 0, out.err
        return out.out

    text = check("--generations", "2")
    assert "cmaes on LunarLander-v3, hebbian-dag [8, 8]" in text and "no run options" not in text
    assert "budget: up to 2,750,000 env steps (at most 2 generations); no workers (this process); expect " in text
    assert "with 1 core(s)" in text
    text = check("--strategy", "ga", "--env", "CartPole-v1")  # the cmaes options go with cmaes
    assert "ga on CartPole-v1, hebbian-dag [8, 8]" in text
    (tmp_path / "w.toml").write_text('workers = 63\nenv = "CartPole-v1"\nmax-env-steps = 100000\n')
    text = check("--config", tmp_path / "w.toml")
    assert "63 worker(s), 64 MPI ranks" in text and "with 63 core(s)" in text
    import re

    with pytest.raises(SystemExit):
        main(["evolve", "--help"])
    shown = re.sub(r"[\s│]+", " ", re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out))
    for option, value in (
        ("--env", "LunarLander-v3"),
        ("--strategy", "cmaes"),
        ("--episodes", "1"),
        ("--max-env-steps", "2750000"),
        ("--select-episodes", "30"),
        ("--validate-top", "2"),
    ):
        assert re.search(re.escape(option) + r" .*?\[default: " + re.escape(value) + r"\]", shown), option


def test_a_stored_config_without_the_target_options_prunes_as_before():
    """Run files from before the target options store strategy options without them: read
    back, they have no target (the agent's own pruning), as when they were made."""
    stored = (
        '{"agent": "pruned-mlp", "env": "LunarLander-v3", "hidden": [16], "strategy": "openai-es", '
        '"strategy_options": {"prune_every": 10, "sigma": 0.1}}'
    )
    cfg = EvolveConfig.from_json(stored)
    assert cfg.options["prune_to"] == 0.0 and cfg.options["prune"] is True
    assert Schedule.of(build_agent(cfg), cfg.options) is None


def test_evolveconfig_is_the_default_experiment():
    """One set of defaults: EvolveConfig() is synapto/defaults.toml's experiment (seed 0 both)."""
    ours = EvolveConfig()
    assert ours == _config(defaults.PATH)
    assert (ours.strategy, ours.env, ours.max_env_steps, ours.options["prune_to"]) == (
        "cmaes",
        "LunarLander-v3",
        2_750_000,
        0.5,
    )
    assert EvolveConfig(strategy="ga").strategy_options == {}  # another strategy: its own defaults
    assert EvolveConfig(strategy_options={"sigma": 0.2}).strategy_options == {"sigma": 0.2}  # given: as given


def test_a_config_file_leaves_out_what_the_command_line_leaves_out(tmp_path):
    """The keys a file leaves out take the default experiment's values, as options left out
    do: the run files of ``--config`` and of the same options given are alike, and hold
    EvolveConfig.from_toml's and EvolveConfig(...)'s config; strategy options a file gives
    are laid over the default experiment's, as --sigma is."""
    import json

    import h5py

    import synapto

    keys = {"env": "CartPole-v1", "population": 8, "generations": 1, "test_episodes": 1, "select_episodes": 1}
    (tmp_path / "c.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
    flags = [a for k, v in keys.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    for name, args in (("file", ["--config", tmp_path / "c.toml"]), ("flags", flags)):
        r = run_cli("evolve", *args, "--out", tmp_path / f"{name}.h5")
        assert r.returncode == 0, r.stderr
    stored = []
    for name in ("file", "flags"):
        with h5py.File(tmp_path / f"{name}.h5", "r") as f:
            stored.append(EvolveConfig.from_json(f.attrs["config"]))
    assert stored[0] == stored[1] == EvolveConfig.from_toml(tmp_path / "c.toml") == EvolveConfig(**keys)
    assert stored[0].strategy == "cmaes" and stored[0].options["prune_to"] == 0.5
    (tmp_path / "s.toml").write_text("sigma = 0.2\n")
    assert synapto.EvolveConfig.from_toml(tmp_path / "s.toml").strategy_options == {
        **EvolveConfig().strategy_options,
        "sigma": 0.2,
    }
    (tmp_path / "g.toml").write_text('strategy = "ga"\n')
    assert synapto.EvolveConfig.from_toml(tmp_path / "g.toml") == EvolveConfig(strategy="ga")


def test_the_docs_mark_one_default_strategy():
    """The strategy table and the option table name the same default: EvolveConfig's."""
    import re

    texts = [(ROOT / "README.md").read_text(), *((p.read_text()) for p in (ROOT / "docs").glob("*.md"))]
    in_tables = {m for t in texts for m in re.findall(r"(?m)^\| `([a-z-]+)` \(default\) \|", t)}
    in_options = {m for t in texts for m in re.findall(r"(?m)^\| `--strategy` \|.*?`([a-z-]+)` \(default\)", t)}
    assert in_tables == in_options == {EvolveConfig().strategy}
