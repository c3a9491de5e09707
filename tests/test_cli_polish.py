"""Small promises of the command line and its outputs: -h is --help, ppo's help reads at 80
columns, ppo tracks its epochs as evolve does, a missing MuJoCo extra names the install line
for an installed package, plot's curves of one run have hues of their own."""

from __future__ import annotations

import colorsys
import csv
import re
import subprocess
import sys

import pytest
from conftest import ROOT, _env, run_cli

from synapto.cli import main


def help_output(capsys, monkeypatch, argv, columns="80"):
    monkeypatch.setenv("COLUMNS", columns)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [["-h"], ["evolve", "-h"], ["ppo", "-h"], ["bench", "envs", "-h"]])
def test_dash_h_is_help(argv, capsys, monkeypatch):
    assert help_output(capsys, monkeypatch, argv).lstrip().startswith("Usage: synapto")


def test_ppo_help_is_readable_at_80_columns(capsys, monkeypatch):
    text = help_output(capsys, monkeypatch, ["ppo", "--help"])
    assert max(len(line) for line in text.splitlines()) <= 80
    starts = []  # where each option's help text begins: after its names and <type>
    for line in text.splitlines():
        m = re.match(r"^│ (--\S+.*?<[^>]+>\s+)\S", line)
        if m:
            starts.append(len(m.group(1)) + 2)
    assert len(starts) >= 30 and max(starts) <= 50, starts  # at least 28 columns left for every help text


def run_main(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_spinning_up_underscore_spellings_are_still_read(tmp_path, capsys):
    code, out, err = run_main(
        capsys,
        "ppo",
        "--env",
        "CartPole-v1",
        "--steps_per_epoch",
        "100",
        "--epochs",
        "1",
        "--pi_lr=0.001",
        "--out",
        tmp_path / "p.h5",
        "--check",
    )
    assert code == 0 and "100 steps" in out + err, err


@pytest.mark.slow
def test_ppo_tensorboard_and_live_log_hold_every_epoch(tmp_path):
    import h5py
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "p.h5"
    proc = run_cli(
        "ppo",
        "--env",
        "CartPole-v1",
        "--epochs",
        "2",
        "--steps-per-epoch",
        "100",
        "--hid",
        "4",
        "--out",
        out,
        "--tensorboard",
        tmp_path / "tb",
        "--live-log",
        tmp_path / "live.csv",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "live.csv") as fh:
        rows = list(csv.DictReader(fh))
    with h5py.File(out, "r") as f:
        returns = f["stats/AverageEpRet"][()]
        steps = f["stats/TotalEnvInteracts"][()]
    assert [int(r["generation"]) for r in rows] == [0, 1]
    assert [float(r["AverageEpRet"]) for r in rows] == list(returns)
    (_events,) = list((tmp_path / "tb").iterdir())
    acc = EventAccumulator(str(tmp_path / "tb")).Reload()
    assert [e.step for e in acc.Scalars("stats/AverageEpRet")] == list(steps) == [100, 200]  # env steps
    assert [e.value for e in acc.Scalars("run/generation")] == [0, 1]


def test_ppo_refuses_a_bad_live_log_before_running(tmp_path, capsys):
    code, _, err = run_main(
        capsys,
        "ppo",
        "--env",
        "CartPole-v1",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "100",
        "--out",
        tmp_path / "p.h5",
        "--live-log",
        tmp_path / "live.txt",
    )
    assert code == 2 and err.startswith("error: --live-log") and not (tmp_path / "p.h5").exists()


def test_missing_mujoco_extra_names_the_package_install_line():
    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "from synapto.envs import make_env\n"
        "try:\n    make_env('HalfCheetah-v5')\nexcept Exception as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert "pip install 'synapto-evo[mujoco]'" in out.stdout and "pip install -e" not in out.stdout, out


def hue(colour) -> float:
    import matplotlib.colors

    return colorsys.rgb_to_hsv(*matplotlib.colors.to_rgb(colour))[0]


def test_evolution_curves_of_one_group_have_distinct_hues():
    pytest.importorskip("matplotlib")
    from types import SimpleNamespace

    from synapto.viz.plot import _line_styles

    curves = ["best", "elite-mean", "pop-mean", "validation"]
    run = SimpleNamespace(curves=dict.fromkeys(curves), config={})
    groups = [SimpleNamespace(key=k, kind="evolve", runs=[run], label=k) for k in ("a", "b", "c")]
    styles = _line_styles(groups, curves)
    for g in groups:
        hues = [hue(styles[(g.key, n)][0]) for n in curves]
        gaps = [min(abs(a - b), 1 - abs(a - b)) for i, a in enumerate(hues) for b in hues[i + 1 :]]
        assert min(gaps) >= 0.05, (g.key, hues)


def test_docs_hold_no_authoring_notes():
    for path in (ROOT / "docs").glob("*.md"):
        text = path.read_text()
        assert "Suggested README text" not in text and "not mine to edit" not in text, path


@pytest.mark.parametrize("sizes", [["8", "8"], ["8,8"], ["[8,8]"], ["(8, 8)"]])
def test_evolve_and_ppo_take_the_same_spellings_of_layer_sizes(sizes, tmp_path, capsys):
    code, out, err = run_main(
        capsys, "evolve", "--env", "CartPole-v1", "--hidden", *sizes, "--out", tmp_path / "e.h5", "--check"
    )
    assert code == 0, err
    assert "hebbian-dag [8, 8] (188 parameters)" in out
    code, out, err = run_main(
        capsys, "ppo", "--env", "CartPole-v1", "--hid", *sizes, "--out", tmp_path / "p.h5", "--check"
    )
    assert code == 0, err
    assert "hid [8, 8]" in out


def test_a_layer_size_that_does_not_parse_is_one_line_naming_the_option(tmp_path, capsys):
    code, _, err = run_main(capsys, "evolve", "--env", "CartPole-v1", "--hidden", "8;8", "--out", tmp_path / "e.h5")
    assert code == 2
    assert err == (
        "error: --hidden '8;8' does not parse; expected integers, e.g. --hidden 8 8, --hidden 8,8 or "
        '--hidden "[8,8]"\n'
    )
