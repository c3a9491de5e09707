"""The net under bad input: generated command lines, config files, env options and strategy
options drive the real ``synapto evolve`` (in this process, through ``synapto.cli.main``) and
the Python API.  Every outcome is a run (exit 0) or one line ``error: ...`` with exit code 2
and nothing written -- never a traceback, never a file left by a refused command, and
``--check`` writes nothing at all.

Accepted runs are tiny (CartPole or Pendulum, one generation, a population of at most 6,
no test episodes).  The examples are bounded (``max_examples``) and the seed database is
off (``database=None``): the test runs within a minute and leaves nothing in the repository.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings, strategies as st  # noqa: E402

import synapto  # noqa: E402
from synapto.cli import main  # noqa: E402
from synapto.common.errors import UsageError  # noqa: E402

SETTINGS = settings(
    max_examples=int(os.environ.get("SYNAPTO_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    database=None,
    derandomize=False,
    suppress_health_check=list(HealthCheck),
)

#: a module that raises on import, for ``--env raising_on_import:Foo-v0``
RAISING = "raise RuntimeError('this module cannot be imported')\n"


def mostly(valid: list, invalid: list):
    """Three valid values for each invalid one: most commands run, the rest probe refusals."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(invalid))


numbers = st.sampled_from([-3, -1, 0, 1, 2, 5, 0.5, -1.0, 1e-9, 1e12, float("nan"), float("inf"), "x", "", "true"])
env_options = st.one_of(
    st.just({}),
    st.just({}),
    st.sampled_from([{"max_episode_steps": 5}, {"max_episode_steps": 50}, {"reward_shift": 0.5}]),
    st.dictionaries(
        st.sampled_from(["max_episode_steps", "reward_shift", "g", "sutton_barto_reward", "gravity", "bogus"]),
        numbers,
        max_size=1,
    ),
)
strategy_options = st.one_of(
    st.just({}),
    st.just({}),
    st.sampled_from([{"sigma": 0.2}, {"prune": "off"}, {"prune_to": 0.5}]),
    st.dictionaries(
        st.sampled_from(
            [
                "sigma",
                "lr",
                "prune",
                "prune_to",
                "prune_by",
                "mutation_std",
                "separable",
                "init_std",
                "popsize",
                "bogus",
            ]
        ),
        st.one_of(numbers, st.sampled_from(["on", "off", "magnitude", "trace", "random"]), st.booleans()),
        max_size=1,
    ),
)
RUN_OPTIONS = {
    "--env": mostly(
        ["CartPole-v1", "Pendulum-v1"],
        ["NoSuchEnv-v9", ":Foo-v0", "raising_on_import:Foo-v0", "CartPole", "gymnasium:NoSuch-v0"],
    ),
    "--agent": mostly(["pruned-mlp", "hebbian-dag"], ["nope", "synapto:Nothing", "synapto.cli:main"]),
    "--hidden": st.one_of(st.lists(st.integers(1, 3), min_size=1, max_size=2), st.sampled_from([[0], [-1], [2, 0]])),
    "--population": mostly([4, 5, 6], [-1, 0, 1, 100_000_000_000]),
    "--episodes": mostly([1, 2], [0, -1]),
    "--seed": st.one_of(st.lists(st.integers(0, 3), min_size=1, max_size=2), st.just([-1])),
    "--strategy": mostly(["ga", "openai-es", "pgpe", "cmaes", "ars"], ["bogus", ""]),
    "--validate-top": mostly([0, 1, 2], [-1, 7]),
    "--validate-episodes": mostly([0, 1, 2], [-1, 100_000_000]),
    "--select-episodes": mostly([0, 1], [-1]),
    "--max-env-steps": mostly([0, 50, 300], [-1]),
    "--task-timeout": mostly(["60", "0.5e3"], ["0", "-1", "1e12", "nan", "inf", "x"]),
    "--on-error": mostly(["abort", "skip"], ["never"]),
    "--schedule": mostly(["dynamic", "waves"], ["x"]),
    "--batch": mostly(["auto", "off"], ["x"]),
    "--sigma": mostly([0.1, 0.5], [0, -1, "nan", "x"]),
    "--prune": mostly(["on", "off"], ["maybe"]),
}
#: keys of a generated config file (TOML values)
CONFIG_KEYS = [
    "env",
    "agent",
    "hidden",
    "population",
    "episodes",
    "strategy",
    "validate_episodes",
    "max-env-steps",
    "max_env_steps",
    "test_episodes",
    "seed",
    "sigma",
    "prune",
    "crn",
    "out",
    "nonsense",
]
toml_values = st.one_of(
    st.integers(-2, 4),
    st.booleans(),
    st.sampled_from(['"CartPole-v1"', '"ga"', '"x"', "[2]", "[]", "0.5", '"pruned-mlp"']),
)


def toml_literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if (isinstance(v, str) and v.startswith(("[", '"'))) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else ("nan" if v != v else "inf")
    return f'"{v}"'


@st.composite
def command_lines(draw):
    """``evolve`` arguments (with ``--out`` and any config file left to the caller)."""
    args = []
    for name in draw(st.lists(st.sampled_from(sorted(RUN_OPTIONS)), unique=True, max_size=4)):
        value = draw(RUN_OPTIONS[name])
        args += [name, *map(str, value)] if isinstance(value, list) else [name, str(value)]
    for key, value in draw(env_options).items():
        args += ["--env-option", f"{key}={toml_literal(value)}"]
    for key, value in draw(strategy_options).items():
        args += ["--strategy-option", f"{key}={toml_literal(value)}"]
    if draw(st.integers(0, 3)) == 0:
        args.append("--obs-norm")
    config = None
    if draw(st.integers(0, 3)) == 0:
        config = {k: draw(toml_values) for k in draw(st.lists(st.sampled_from(CONFIG_KEYS), unique=True, max_size=3))}
        config = "\n".join(
            f"{k} = {toml_literal(v) if not isinstance(v, str) else v}" for k, v in config.items()
        ).encode()
        if draw(st.booleans()):
            config += b"\n# \xff\n"  # not UTF-8
    return args, config, draw(st.booleans())


def tiny(args: list[str]) -> list[str]:
    """Bounds on what an accepted command may cost (one generation, small population), put
    first so that a generated option of the same name wins."""
    return [
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
        "1",
        "--select-episodes",
        "0",
        "--test-episodes",
        "0",
        "-q",
        *args,
    ]


def run_main(argv) -> tuple[int, str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # what main let through: a traceback for the user
            import traceback

            traceback.print_exception(exc, file=err)
            code = 1
    return code, err.getvalue()


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def assert_outcome(code: int, err: str, argv) -> None:
    assert "Traceback" not in err, f"{argv}:\n{err}"
    assert code in (0, 2), f"exit {code} for {argv}:\n{err}"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{argv}:\n{err}"


@pytest.fixture(autouse=True)
def raising_module(monkeypatch):
    folder = Path(tempfile.mkdtemp(prefix="synapto-prop-"))
    (folder / "raising_on_import.py").write_text(RAISING)
    monkeypatch.syspath_prepend(str(folder))
    yield


@SETTINGS
@given(command_lines())
def test_evolve_command_line_is_a_run_or_one_line(case):
    args, config, check = case
    with tempfile.TemporaryDirectory(prefix="synapto-prop-") as d:
        d = Path(d)
        inputs = {"c.toml"}
        argv = ["evolve", *tiny(args), "--out", d / "out" / "r.h5"]
        if config is not None:
            (d / "c.toml").write_bytes(config)
            argv += ["--config", d / "c.toml"]
        code, err = run_main([*argv, "--check"])
        event(f"--check: exit {code}")
        assert_outcome(code, err, [*argv, "--check"])
        assert files_under(d) <= inputs, f"--check wrote {files_under(d) - inputs} for {argv}"
        if code == 0 and check:
            code, err = run_main(argv)
            event(f"run: exit {code}")
            assert_outcome(code, err, argv)
            if code == 2:
                assert files_under(d) <= inputs, f"refused, yet wrote {files_under(d) - inputs}: {argv}\n{err}"


api_fields = st.fixed_dictionaries(
    {},
    optional={
        "env": st.sampled_from(["CartPole-v1", "Pendulum-v1", "NoSuchEnv-v9", ":Foo-v0", 3]),
        "agent": st.sampled_from(["pruned-mlp", "hebbian-dag", "nope", None]),
        "hidden": st.one_of(st.lists(st.integers(-1, 3), max_size=2).map(tuple), st.just("8")),
        "population": st.one_of(st.integers(-1, 6), st.just(2.5), st.just(True)),
        "episodes": st.integers(-1, 2),
        "seed": st.integers(-1, 3),
        "strategy": st.sampled_from(["ga", "openai-es", "pgpe", "cmaes", "ars", "bogus"]),
        "strategy_options": strategy_options,
        "env_options": env_options,
        "validate_episodes": st.integers(-1, 2),
        "validate_top": st.integers(-1, 3),
        "select_episodes": st.integers(-1, 1),
        "max_env_steps": st.integers(-1, 300),
        "obs_norm": st.one_of(st.booleans(), st.just("yes")),
        "crn": st.one_of(st.booleans(), st.just(1)),
    },
)


@SETTINGS
@given(api_fields, st.booleans())
def test_api_is_a_run_or_a_usage_error(fields, run):
    base = dict(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(2,),
        population=4,
        generations=1,
        episodes=1,
        validate_episodes=1,
        test_episodes=0,
    )
    with tempfile.TemporaryDirectory(prefix="synapto-prop-") as d:
        out = Path(d) / "out" / "r.h5"
        try:
            cfg = synapto.EvolveConfig(**{**base, **fields})
            if run:
                summary = synapto.evolve(cfg, out, log=lambda line: None)
                assert summary.generations == 1 and out.exists()
        except UsageError as exc:
            assert "\n" not in str(exc)
            assert not os.listdir(d), f"refused ({exc}), yet wrote {os.listdir(d)}"
