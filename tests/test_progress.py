"""What a run says while it goes and when it ends: plain progress lines where no progress bar
can be drawn (under --workers N, in a log file), an eta from the pace after start-up, the
budget that ends the run, shaped training figures labelled as such, the final centre named
after the generation that made it, and every command's last lines: what it wrote and what
to run next."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import h5py
import numpy as np
import pytest
from conftest import ROOT, run_cli

import synapto
from synapto.cli import main
from synapto.common.shell import synapto_command

RUN = [
    *("--env", "CartPole-v1", "--agent", "pruned-mlp", "--hidden", "4", "--strategy", "openai-es"),
    *("--population", "4", "--episodes", "1", "--validate-top", "1", "--validate-episodes", "1"),
    *("--batch", "off", "--seed", "0"),
]


def run_main(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


# ---------------------------------------------------------------------------- live progress
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_phase_prints_a_plain_line_every_so_often():
    from synapto.evolution.progress import PlainProgress

    lines, clock = [], Clock()
    plain = PlainProgress(lines.append, 20.0, clock)
    plain.phase("test", 120)
    for t, done in ((5, 1), (19.9, 2), (21, 3), (30, 4), (41, 5), (61, 9), (70, 10)):
        clock.now = t
        plain(done, 10)
    assert lines == [
        "  champion test: 3/10 episodes, 0:00:21, eta 0:00:49",
        "  champion test: 5/10 episodes, 0:00:41, eta 0:00:41",
        "  champion test: 9/10 episodes, 0:01:01, eta 0:00:06",
    ]
    plain.phase("selection", 120)  # a new phase starts its own clock
    clock.now = 75
    plain(1, 40)
    plain.phase("training", 7)
    clock.now = 96
    plain(1, 64)
    assert lines[3:] == ["  generation 7 training: 1/64 evaluations, 0:00:21, eta 0:22:03"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    "interval, env",
    [
        ([], {"SYNAPTO_PROGRESS_EVERY": "0"}),
        (["--progress-every", "0"], {}),
        (["--progress-every", "0"], {"SYNAPTO_PROGRESS_EVERY": "600"}),
    ],
    ids=["environment", "option", "option-over-environment"],
)
def test_under_workers_selection_and_test_say_when_they_start_and_how_far_they_are(tmp_path, interval, env):
    out = tmp_path / "w.h5"
    args = [*RUN, "--generations", "2", "--select-episodes", "2", "--test-episodes", "3", "--workers", "1", *interval]
    proc = run_cli("evolve", *args, "--out", out, extra_env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("selecting the champion among"))
    test = next(i for i, line in enumerate(lines) if line.startswith("testing the champion"))
    assert lines[test].endswith("on 3 test episodes")
    assert any(re.fullmatch(r"  final selection: \d+/\d+ evaluations, .*", line) for line in lines[start:test])
    assert [line.split(",")[0] for line in lines[test:] if line.startswith("  champion test")] == [
        "  champion test: 1/3 episodes",
        "  champion test: 2/3 episodes",
    ]
    assert any(line.startswith("  generation 1 training: ") for line in lines)


def test_a_bad_progress_interval_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("evolve", *RUN, "--out", tmp_path / "x.h5", extra_env={"SYNAPTO_PROGRESS_EVERY": "soon"}, timeout=60)
    assert (
        proc.returncode == 2
        and proc.stderr == "error: $SYNAPTO_PROGRESS_EVERY must be a number of seconds >= 0, got 'soon'\n"
    )
    assert not (tmp_path / "x.h5").exists()


def test_a_bad_progress_every_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("evolve", *RUN, "--out", tmp_path / "x.h5", "--progress-every", "-1", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == "error: --progress-every must be a number of seconds >= 0, got -1.0\n"
    assert not (tmp_path / "x.h5").exists()


def test_the_eta_waits_for_a_few_generations_and_leaves_start_up_out():
    from synapto.evolution.progress import Budget, Eta

    eta = Eta(Budget(generations=5000, max_env_steps=1000))
    # the first generation took 100 s (start-up), the next ones 1 s for 10 env steps each
    assert eta(1, 10, 100.0) is None and eta(2, 20, 101.0) is None
    assert eta(3, 30, 102.0) == pytest.approx(2.0 * 0.97 / 0.02)  # 97 s: 970 steps at 10 steps/s
    assert eta(4, 40, 103.0) == pytest.approx(96.0)
    gens = Eta(Budget(generations=100))  # generations end the run: their pace
    assert [gens(g, 10**6, 10.0 * g) for g in (1, 2, 3)] == [None, None, pytest.approx(970.0)]


def test_the_terminal_bar_shows_the_same_eta_as_the_lines():
    import io

    from synapto.evolution.progress import Budget, RunProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    bar = RunProgress(Budget(generations=5000, max_env_steps=1000), Terminal()).start(0, 0)
    try:
        bar.advance(1, 10, None)
        assert bar.progress.tasks[0].fields["eta"] == ""  # not before a few generations
        bar.advance(3, 30, 97.0)
        assert bar.progress.tasks[0].fields["eta"] == "eta 0:01:37"
    finally:
        bar.stop()


# ---------------------------------------------------------------------------- the binding budget
def test_resume_reports_the_env_step_budget_that_ends_the_run_and_a_lower_one_ends_it(tmp_path, capsys):
    out = tmp_path / "r.h5"
    common = ["--select-episodes", "0", "--test-episodes", "1"]
    code, _, err = run_main(
        capsys, "evolve", *RUN, *common, "--generations", "2", "--max-env-steps", "100000", "--out", out
    )
    assert code == 0, err
    with h5py.File(out, "r") as f:
        steps = int(f["stats/env_steps"][1] + f["stats/validation_env_steps"][1])
    code, text, err = run_main(
        capsys, "evolve", "--resume", out, "--generations", "5000", "--max-env-steps", steps + 1, "--check"
    )
    assert code == 0 and text == f"ok: {out} resumes from generation 2 ({steps:,} of {steps + 1:,} env steps done)\n"
    code, text, err = run_main(capsys, "evolve", "--resume", out, "--generations", "5000", "--max-env-steps", steps + 1)
    assert code == 0, err
    assert f"resuming {out} at generation 2 ({steps:,} of {steps + 1:,} env steps)" in text.splitlines()
    assert "of 5000" not in text and "5,000 generations)" in text  # only as the upper bound


def test_resume_help_says_a_lower_env_step_budget_ends_a_run_sooner(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, text, _ = run_main(capsys, "evolve", "--help")
    assert code == 0
    words = " ".join(re.sub(r"[│\s]+", " ", text).split())
    assert "give a lower --max-env-steps to end it sooner" in words


# ---------------------------------------------------------------------------- shaped training
def test_shaped_training_figures_are_labelled_in_the_progress_lines(tmp_path, capsys):
    args = [*RUN, "--generations", "1", "--select-episodes", "0", "--test-episodes", "0"]
    code, text, err = run_main(capsys, "evolve", *args, "--env-option", "stall_steps=50", "--out", tmp_path / "s.h5")
    assert code == 0, err
    gen = [line for line in text.splitlines() if line.startswith("gen ")]
    assert len(gen) == 1 and re.match(r"gen +0 +100\.0%  train\(shaped\) best +\S+  mean +\S+  val +\S+  conn", gen[0])
    assert "training episodes are shaped (stall_steps=50): the train(shaped) figures are not CartPole-v1's" in text
    code, text, err = run_main(capsys, "evolve", *args, "--out", tmp_path / "u.h5")
    assert code == 0 and "train(shaped)" not in text and "are shaped" not in text
    assert re.search(r"^gen +0 +100\.0%  best +\S+  val +\S+  mean ", text, re.M)


@pytest.fixture(scope="module")
def shaped_run(tmp_path_factory):
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("shaped") / "s.h5"
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(4,),
        population=4,
        generations=2,
        episodes=1,
        validate_top=1,
        validate_episodes=1,
        test_episodes=0,
        strategy="openai-es",
        env_options={"fall_reward": 0, "stall_steps": 50},
    )
    synapto.evolve(cfg, out, log=lambda m: None)
    return out


def test_plot_names_shaped_training_and_the_unmodified_validation(shaped_run):
    from synapto.store.series import read_run
    from synapto.viz.plot import curves_figure

    fig, _ = curves_figure([read_run(shaped_run)], ["generation"], connections=False)
    labels = [t.get_text().replace("\n", " ") for legend in fig.legends for t in legend.get_texts()]
    assert {label.split(": ", 1)[1] for label in labels} == {
        "best fitness (shaped training)",
        "elite-mean fitness (shaped training)",
        "pop-mean fitness (shaped training)",
        "best validation fitness (unmodified task)",
    }
    assert fig.axes[0].get_ylabel() == "fitness (training: shaped)"


# ---------------------------------------------------------------------------- the final centre
def test_a_final_centre_champion_is_named_after_the_last_generation(tmp_path):
    from synapto.policies import pick_genome

    lines: list[str] = []
    out = tmp_path / "c.h5"
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(4,),
        population=8,
        generations=2,
        episodes=1,
        validate_episodes=2,
        validate_top=0,
        max_env_steps=0,
        test_episodes=2,
        strategy="openai-es",
        strategy_options={},
        seed=0,
    )
    synapto.evolve(dataclasses.replace(cfg, select_episodes=2, obs_norm=True), out, log=lines.append)
    with h5py.File(out, "r") as f:
        assert np.isnan(f["champion/fitness"][0])  # the final centre was chosen
    last = max(int(line.split()[1]) for line in lines if line.startswith("gen "))
    assert last == 1
    named = [int(n) for line in lines for n in re.findall(r"generation (\d+)", line)]
    assert named and max(named) == last, lines  # never a generation no line showed
    assert "testing the champion (the final centre, after generation 1, not evaluated) on 2 test episodes" in lines
    assert any(
        line.startswith("champion (the final centre, after generation 1): not validated, selection") for line in lines
    )
    assert pick_genome(out).label == "final centre after gen 1"


# ---------------------------------------------------------------------------- next steps
def test_ppo_ends_with_what_it_wrote_and_commands_that_run(tmp_path):
    out = tmp_path / "p.h5"
    proc = run_cli(
        *("ppo", "--env", "CartPole-v1", "--epochs", "1", "--steps-per-epoch", "100", "--hid", "4"),
        *("--test-episodes", "1", "--out", out),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    tail = proc.stdout.splitlines()[-4:]
    labels = [line.split(":", 1)[0] for line in tail]
    assert labels == ["run file", "progress.txt", "learning curves", "the policy"]
    assert all(line[18] != " " and line[17] == " " for line in tail)  # one column, as evolve's
    assert tail[0].endswith(str(out)) and tail[1].split()[1] == str(tmp_path / "p" / "progress.txt")
    assert (tmp_path / "p" / "progress.txt").is_file()
    for line in tail[2:]:
        ran = subprocess.run(["/bin/sh", "-c", line.split(":", 1)[1]], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "p_curves.png").stat().st_size > 0 and (tmp_path / "p_policy.gif").stat().st_size > 0


def test_tune_ends_with_what_it_wrote_and_how_to_score_it(tmp_path, capsys):
    pytest.importorskip("optuna")
    base = tmp_path / "base.toml"
    base.write_text((ROOT / "experiments" / "cartpole.toml").read_text().replace("20_000", "2_000"))
    space = tmp_path / "space.toml"
    space.write_text("benchmark_seeds = [1, 2]\n[params]\nlr = { log_uniform = [0.0001, 0.3] }\n")
    db = tmp_path / "t.db"
    code, text, err = run_main(
        capsys,
        *("tune", "--config", base, "--space", space, "--seeds", 1000, "--trials", 1, "--study", db),
        *("--pruner", "none", "--score-episodes", 2),
    )
    assert code == 0, err
    tail = dict(line.split(":", 1) for line in text.splitlines()[-4:])
    assert {k: v.strip() for k, v in tail.items()} == {
        "best config": str(tmp_path / "t.best.toml"),
        "trials' runs": f"{tmp_path / 't.trials'}/",
        "table and plots": f"{synapto_command('tune', '--report', db)}",
        "score it": f"{synapto_command('evolve', '--config', tmp_path / 't.best.toml', '--seed', 1, 2)}",
    }
    assert (tmp_path / "t.best.toml").is_file() and (tmp_path / "t.trials").is_dir()
    code, text, err = run_main(capsys, "tune", "--report", db)
    assert code == 0 and text.splitlines()[-1] == f"history plot:     {tmp_path / 't.history.png'}", text
