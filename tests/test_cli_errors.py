"""Bad input: one line on stderr, exit code 2, nothing overwritten.  Most cases run the
command line in this process (``synapto.cli.main``); one per command runs it as a process."""

import os
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest
from conftest import ROOT, run_cli

from synapto.cli import main

SMALL = [
    "--env",
    "CartPole-v1",
    "--population",
    "4",
    "--generations",
    "1",
    "--episodes",
    "1",
    "--test-episodes",
    "0",
    "--hidden",
    "2",
]


def call(capsys, *args):
    """``python -m synapto <args>`` in this process, for input refused before anything runs:
    ``(exit code, stderr)``."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr().err


def assert_usage_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def assert_process_usage_error(proc, *needles):
    assert_usage_error(proc.returncode, proc.stdout + proc.stderr, *needles)


#: a user's package outside synapto, written into a directory put on PYTHONPATH
USER_PACKAGE = {
    "mypkg/__init__.py": "",
    "mypkg/mod.py": '''
        from synapto.agents.base import Agent
        from synapto.agents.pruned_mlp import PrunedMLP


        class MyAgent(PrunedMLP):
            """A user's agent: pruned-mlp under another name."""


        class Abstract(Agent):
            """Implements none of Agent's methods."""


        class Raising(PrunedMLP):
            def __init__(self, space, hidden, options):
                raise RuntimeError("this agent cannot be built")
        ''',
    "norender.py": '''
        import gymnasium as gym
        import numpy as np


        class NoRender(gym.Env):
            """An env whose constructor takes no render_mode (gymnasium does not require one)."""

            observation_space = gym.spaces.Box(-1.0, 1.0, (3,))
            action_space = gym.spaces.Discrete(2)

            def __init__(self):
                self.t = 0

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.t = 0
                return np.zeros(3, dtype=np.float32), {}

            def step(self, action):
                self.t += 1
                return np.full(3, 0.1 * action, dtype=np.float32), 1.0, self.t >= 10, False, {}


        gym.register("NoRender-v0", entry_point=NoRender, max_episode_steps=20)
        ''',
}


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    root = tmp_path / "user"
    for name, text in USER_PACKAGE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(root))
    return root


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--env", "NoSuchEnv-v9"], ["NoSuchEnv-v9"]),
        (["--agent", "nope"], ["nope", "pruned-mlp"]),
        (["--agent", "no_such_pkg.mod:Cls"], ["no_such_pkg.mod"]),
        (["--agent", "synapto.agents.pruned_mlp:Missing"], ["Missing"]),
        (["--agent", "synapto.agents.base:Agent"], ["abstract"]),
        (["--agent", "mypkg.mod:Abstract"], ["Abstract is abstract"]),
        (["--agent", "mypkg.mod:Raising"], ["Raising", "this agent cannot be built"]),
        (["--population", "1"], ["--population", "1"]),
        (["--hidden", "8", "0"], ["--hidden", "0"]),
        (["--hidden", "-3"], ["--hidden"]),
        (["--episodes", "0"], ["--episodes", "0"]),
        (["--generations", "0"], ["--generations"]),
        (["--population", "abc"], ["--population"]),
        (["--seed", "-1"], ["--seed"]),
        (["--workers", "-2"], ["--workers"]),
        (["--task-timeout", "0"], ["--task-timeout", "0"]),
        (["--task-timeout", "-1"], ["--task-timeout"]),
        (["--task-timeout", "soon"], ["--task-timeout"]),
        (["--checkpoint-every", "0"], ["--checkpoint-every"]),
        (["--on-error", "ignore"], ["--on-error"]),
    ],
)
def test_bad_options(tmp_path, capsys, user_package, args, needles):
    assert_usage_error(*call(capsys, "evolve", *SMALL, "--out", tmp_path / "r.h5", *args), *needles)
    assert not (tmp_path / "r.h5").exists()


def test_bad_option_as_a_process(tmp_path):
    proc = run_cli("evolve", *SMALL, "--out", tmp_path / "r.h5", "--agent", "nope", timeout=180)
    assert_process_usage_error(proc, "nope")
    assert not (tmp_path / "r.h5").exists()


def test_config_that_does_not_parse(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("population = = 3\n")
    assert_usage_error(*call(capsys, "evolve", "--config", cfg), "bad.toml", "TOML")


def test_config_with_unknown_key_or_bad_value(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("population = 8\npopulaton = 3\n")
    assert_usage_error(*call(capsys, "evolve", "--config", cfg), "populaton")
    cfg.write_text("task_timeout = -5\n")
    assert_usage_error(*call(capsys, "evolve", "--config", cfg), "--task-timeout", "-5")
    cfg.write_text('task-timeout = "soon"\n')
    assert_usage_error(*call(capsys, "evolve", "--config", cfg), "--task-timeout", "soon")


def test_missing_config(tmp_path, capsys):
    assert_usage_error(*call(capsys, "evolve", "--config", tmp_path / "none.toml"), "none.toml")


def test_existing_out_without_force_is_left_untouched(tmp_path, capsys):
    out = tmp_path / "r.h5"
    out.write_bytes(b"precious")
    assert_usage_error(*call(capsys, "evolve", *SMALL, "--out", out), "--force")
    assert out.read_bytes() == b"precious"
    proc = run_cli("evolve", *SMALL, "--out", out, "--force", timeout=120)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        assert f["completed"][0] == 1


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert_usage_error(*call(capsys, "evolve", *SMALL, "--out", blocker / "r.h5"), "--out")


def test_replay_bad_inputs(tmp_path, capsys):
    assert_process_usage_error(run_cli("replay", tmp_path / "missing.h5", "--sample", "1", timeout=180), "no such file")
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"\x00" * 100)
    assert_usage_error(*call(capsys, "replay", junk, "--sample", "1"), "not a readable HDF5")
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = 1
    assert_usage_error(*call(capsys, "replay", other, "--sample", "1"), "not a synapto run")
    out = tmp_path / "r.h5"
    assert run_cli("evolve", *SMALL, "--out", out, timeout=120).returncode == 0
    assert_usage_error(*call(capsys, "replay", out, "--generation", "1", "--individual", "0"), "--generation 1", "0..0")
    assert_usage_error(*call(capsys, "replay", out, "--generation", "0", "--individual", "4"), "--individual 4", "0..3")
    assert_usage_error(*call(capsys, "replay", out), "--sample")


# --------------------------------------------------------------------------- $SYNAPTO_MPIEXEC
@pytest.mark.mpi
def test_synapto_mpiexec_is_used_and_a_wrong_one_is_one_line(tmp_path):
    from conftest import MPIEXEC

    wrapper = tmp_path / "my-mpiexec"
    used = tmp_path / "used"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s " "$@" > {used}\nexec {MPIEXEC} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "r.h5"
    proc = run_cli(
        "evolve", *SMALL, "--workers", "1", "--out", out, timeout=180, extra_env={"SYNAPTO_MPIEXEC": wrapper}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 worker ->" in proc.stdout and used.read_text().startswith("-n 2 ")
    for wrong in (tmp_path / "no-such-mpiexec", tmp_path):  # missing; not an executable file
        proc = run_cli(
            "evolve",
            *SMALL,
            "--workers",
            "1",
            "--out",
            tmp_path / "s.h5",
            timeout=180,
            extra_env={"SYNAPTO_MPIEXEC": wrong},
        )
        assert_process_usage_error(proc, "SYNAPTO_MPIEXEC", str(wrong))
        assert not (tmp_path / "s.h5").exists()


# --------------------------------------------------------------------------- configs
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.toml"))


def test_every_shipped_config_is_accepted():
    """Each experiments/*.toml loads into the configurations its command runs (every seed),
    with an agent built for its env; nothing is run."""
    from synapto.agents import build_agent
    from synapto.common.config import load_toml
    from synapto.evolution.config import EVOLVE_KEYS, EvolveConfig, strategy_options
    from synapto.evolution.run_options import check_task_timeout
    from synapto.evolution.strategies import make_strategy
    from synapto.ppo.config import build_config, load_ppo_toml

    assert len(EXPERIMENTS) >= 5 and ROOT / "experiments" / "quickstart.toml" in EXPERIMENTS
    for path in EXPERIMENTS:
        if path.name.startswith("ppo"):
            values = load_ppo_toml(path)
            seeds = values.pop("seed", [0])
            for key in ("cpu", "out"):
                values.pop(key, None)
            configs = [build_config({**values, "seed": s}) for s in ([seeds] if isinstance(seeds, int) else seeds)]
            assert configs and all(c.env for c in configs)
            continue
        values = load_toml(path, EVOLVE_KEYS)
        seeds = values.pop("seed", [0])
        assert isinstance(values.pop("workers", 0), int) and str(values.pop("out", "x.h5")).endswith(".h5")
        check_task_timeout(values.pop("task_timeout", None))
        values["strategy_options"] = strategy_options(values, None)
        configs = [EvolveConfig(**values, seed=s) for s in ([seeds] if isinstance(seeds, int) else seeds)]
        make_strategy(configs[0], build_agent(configs[0]), np.random.default_rng(0))  # options against the agent


def test_config_file_with_command_line_overrides(tmp_path):
    """quickstart.toml through the command line, shrunk by overrides: the file gives what
    the command line does not."""
    import json

    import tomllib

    path = ROOT / "experiments" / "quickstart.toml"
    toml = tomllib.loads(path.read_text())
    out = tmp_path / "q.h5"
    proc = run_cli(
        "evolve",
        "--config",
        path,
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
        "--seed",
        "3",
        "--out",
        out,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        cfg = json.loads(f.attrs["config"])
    assert (cfg["population"], cfg["generations"], cfg["episodes"], cfg["seed"]) == (4, 1, 1, 3)
    assert (cfg["env"], cfg["agent"], cfg["hidden"]) == (toml["env"], toml["agent"], toml["hidden"])


# --------------------------------------------------------------------------- user code
def test_user_agent_outside_the_package(tmp_path, user_package):
    out = tmp_path / "r.h5"
    proc = run_cli(
        "evolve",
        *SMALL,
        "--agent",
        "mypkg.mod:MyAgent",
        "--out",
        out,
        timeout=180,
        extra_env={"PYTHONPATH": os.pathsep.join([str(user_package), str(ROOT)])},
    )
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out, "r") as f:
        assert f.attrs["agent_name"] and '"mypkg.mod:MyAgent"' in f.attrs["config"]


def test_no_top_level_agents_package(tmp_path):
    """Agents live in synapto.agents; the installed package adds no top-level ``agents``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", "import agents"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and "No module named 'agents'" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-c", "import synapto.agents"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def test_env_without_render_mode_argument(user_package, tmp_path):
    from synapto.common.errors import UsageError
    from synapto.envs import make_env, space_info
    from synapto.evolution.worker.evaluate import Evaluator
    from synapto.evolution.worker.spec import EvolveSpec
    from synapto.evolution.worker.tasks import Episodes, EvalTask

    assert space_info("norender:NoRender-v0").act_dim == 2
    ev = Evaluator(EvolveSpec("norender:NoRender-v0", "pruned-mlp", (2,), {}))
    result = ev(EvalTask(ev.agent.init_genome(__import__("numpy").random.default_rng(0)), Episodes([1, 2])))
    assert result.steps.tolist() == [10, 10]
    with pytest.raises(UsageError, match="render_mode"):
        make_env("norender:NoRender-v0", render_mode="rgb_array")


def test_check_says_what_would_run_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.h5"
    with pytest.raises(SystemExit) as exc:
        main(["evolve", *SMALL, "--agent", "pruned-mlp", "--strategy", "openai-es", "--out", str(out), "--check"])
    assert exc.value.code in (0, None)
    said = capsys.readouterr().out.strip().splitlines()
    # pruned-mlp 4-2-2 on CartPole (no biases): 4*2 + 2*2 weights
    assert said[0] == (f"ok: 1 run(s): openai-es on CartPole-v1, pruned-mlp [2] (12 parameters), population 4 -> {out}")
    # the budget (the default experiment's env steps, the generations given), the workers, the estimate
    assert len(said) == 2 and said[1].startswith(
        "budget: up to 2,750,000 env steps (at most 1 generations); no workers (this process); expect "
    ), said
    assert not list(tmp_path.iterdir())  # no run file, no lock, no checkpoint


def test_check_refuses_what_the_run_would_refuse(tmp_path, capsys):
    code, err = call(
        capsys,
        "evolve",
        *SMALL,
        "--strategy",
        "openai-es",
        "--mutation-std",
        "0.3",
        "--out",
        tmp_path / "r.h5",
        "--check",
    )
    assert_usage_error(code, err, "mutation_std")
    assert not list(tmp_path.iterdir())
