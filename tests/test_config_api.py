"""``EvolveConfig.from_toml`` and ``PPOConfig.from_toml`` read a config file as the command
line's ``--config`` does: the run files of the CLI hold the very config the API builds."""

from __future__ import annotations

import json

import h5py
import pytest
from conftest import run_cli

import synapto
from synapto.common.config import shipped_configs
from synapto.common.errors import UsageError
from synapto.ppo.config import PPOConfig

EVOLVE_TOML = """
env = "CartPole-v1"
agent = "hebbian-dag"
hidden = [3]
population = 4
generations = 1
episodes = 1
validate_episodes = 0
test-episodes = 0
strategy = "openai-es"
sigma = 0.2
seed = [5]
workers = 0
out = "ignored.h5"
[agent_options]
init_prune = 0.1
"""


def stored_config(path) -> dict:
    with h5py.File(path, "r") as f:
        return json.loads(f.attrs["config"])


@pytest.mark.slow
def test_evolve_from_toml_is_the_config_the_cli_runs(tmp_path):
    (tmp_path / "c.toml").write_text(EVOLVE_TOML)
    proc = run_cli("evolve", "--config", tmp_path / "c.toml", "--out", tmp_path / "r.h5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cfg = synapto.EvolveConfig.from_toml(tmp_path / "c.toml")
    assert json.loads(cfg.to_json()) == stored_config(tmp_path / "r.h5")
    assert cfg.strategy_options == {"sigma": 0.2} and cfg.seed == 5 and cfg.agent_options == {"init_prune": 0.1}
    assert synapto.EvolveConfig.from_toml(tmp_path / "c.toml", population=6).population == 6


@pytest.mark.slow
def test_ppo_from_toml_is_the_config_the_cli_runs(tmp_path):
    (tmp_path / "p.toml").write_text(
        'env = "CartPole-v1"\nhid = "[4]"\nepochs = 1\nsteps_per_epoch = 100\nseed = 3\ncpu = 1\n'
    )
    proc = run_cli("ppo", "--config", tmp_path / "p.toml", "--out", tmp_path / "r.h5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cfg = PPOConfig.from_toml(tmp_path / "p.toml")
    assert cfg == PPOConfig.from_json(json.dumps(stored_config(tmp_path / "r.h5")))
    assert cfg.hid == (4,) and PPOConfig.from_toml(tmp_path / "p.toml", epochs=7).epochs == 7


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_every_shipped_config_loads_by_name(name):
    cls = PPOConfig if name.startswith("ppo") else synapto.EvolveConfig
    cfg = cls.from_toml(name, seed=1)  # several shipped configs list several seeds
    from synapto.common.config import tomllib

    raw = tomllib.loads(shipped_configs()[name].read_text())
    assert cfg.env == raw.get("env", cfg.env) and cfg.seed == 1


def test_from_toml_refusals_are_one_line_usage_errors(tmp_path):
    (tmp_path / "s.toml").write_text("seed = [1, 2]\n")
    with pytest.raises(UsageError, match="seed=N"):
        synapto.EvolveConfig.from_toml(tmp_path / "s.toml")
    (tmp_path / "u.toml").write_text("popul = 3\n")
    with pytest.raises(UsageError, match="unknown key"):
        synapto.EvolveConfig.from_toml(tmp_path / "u.toml")
    with pytest.raises(UsageError, match="cannot be read"):
        PPOConfig.from_toml(tmp_path / "missing.toml")


def test_the_cli_and_the_api_accept_the_same_keys():
    import dataclasses

    from synapto.evolution.config import EVOLVE_KEYS, EVOLVE_RUN_KEYS, STRATEGY_SHORTHANDS, EvolveConfig

    assert set(EVOLVE_KEYS) == (
        {f.name for f in dataclasses.fields(EvolveConfig)} | EVOLVE_RUN_KEYS | set(STRATEGY_SHORTHANDS)
    )


DASHED = """env = "CartPole-v1"
strategy = "openai-es"
max-env-steps = 2000
test-episodes = 2
[strategy-options]
weight-decay = 0.01
prune = false
[env-options]
max-episode-steps = 300
"""


def test_config_keys_take_dashes_or_underscores_in_tables_too(tmp_path, capsys):
    """One key, two spellings (underscores are the canonical one, the shipped configs'):
    ``max-env-steps`` is ``max_env_steps``, ``[strategy-options]`` ``weight-decay`` is
    ``weight_decay``; one key spelt both ways is refused in one line."""
    from synapto.cli import main

    (tmp_path / "dashed.toml").write_text(DASHED)
    plain = DASHED.replace("-", "_").replace("CartPole_v1", "CartPole-v1").replace("openai_es", "openai-es")
    (tmp_path / "plain.toml").write_text(plain)
    dashed, plain = (synapto.EvolveConfig.from_toml(tmp_path / f"{n}.toml") for n in ("dashed", "plain"))
    assert dashed == plain and dashed.strategy_options == {"weight_decay": 0.01, "prune": False}
    assert dashed.env_options == {"max_episode_steps": 300} and dashed.max_env_steps == 2000
    with pytest.raises(SystemExit) as exc:
        main(["evolve", "--config", str(tmp_path / "dashed.toml"), "--out", str(tmp_path / "r.h5"), "--check"])
    assert exc.value.code == 0 and "openai-es on CartPole-v1" in capsys.readouterr().out
    (tmp_path / "twice.toml").write_text("[strategy_options]\nweight-decay = 0.1\nweight_decay = 0.2\n")
    with pytest.raises(UsageError, match=r"^\[strategy_options\] sets weight_decay twice"):
        synapto.EvolveConfig.from_toml(tmp_path / "twice.toml")


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_shipped_configs_spell_keys_the_canonical_way(name):
    import tomllib

    def keys(table):
        for k, v in table.items():
            yield k
            if isinstance(v, dict):
                yield from keys(v)

    data = tomllib.loads(shipped_configs()[name].read_text())
    assert [k for k in keys(data) if "-" in k] == []
