"""What a new user runs outside the checkout: the printed next steps from a fresh shell,
and a wheel built from the checkout, installed in a fresh virtual environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import h5py
import pytest
from conftest import ROOT, _env

RUN = [
    "--env",
    "CartPole-v1",
    "--env-option",
    "max_episode_steps=20",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "3",
    "--population",
    "6",
    "--generations",
    "2",
    "--episodes",
    "1",
    "--validate-episodes",
    "0",
    "--test-episodes",
    "2",
]


def fresh_shell_env(home: Path) -> dict:
    """A login shell's environment: no virtual environment, no PYTHONPATH, a plain PATH."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SDL_VIDEODRIVER": "dummy",
        "SDL_AUDIODRIVER": "dummy",
    }


def test_printed_next_steps_run_from_a_fresh_shell(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "synapto", "evolve", *RUN, "--out", "runs/a.h5"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    steps = [
        line.split(":", 1)[1].strip()
        for line in proc.stdout.splitlines()
        if line.startswith(("learning curves:", "the champion:"))
    ]
    assert len(steps) == 2 and "plot runs/a.h5" in steps[0] and "render runs/a.h5" in steps[1]
    for command in steps:
        ran = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=tmp_path,
            env=fresh_shell_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, f"{command}\n{ran.stdout}\n{ran.stderr}"
    assert (tmp_path / "runs" / "a_curves.png").stat().st_size > 0
    assert (tmp_path / "runs" / "a_champion.gif").stat().st_size > 0


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_runs_a_shipped_config_outside_the_checkout(tmp_path):
    """The wheel of the checkout's tracked files, installed without its dependencies into a
    fresh venv that borrows them from this one (no network, a few seconds): its own
    `synapto` script runs `evolve --config quickstart` from a folder outside the checkout."""
    import site

    src = tmp_path / "src"
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_symlink():
            target.symlink_to(os.readlink(ROOT / name))
        elif (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = dist.glob("synapto_evo-*.whl")
    import zipfile

    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        meta = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "synapto/experiments/quickstart.toml" in names  # the shipped configs travel with the package
    assert any(n.endswith(("licenses/LICENSE", "/LICENSE")) for n in names)
    for line in (
        "Name: synapto-evo",
        "License: MIT",
        "Requires-Python: >=3.10",
        "Provides-Extra: mpich",
        "Classifier: Programming Language :: Python :: 3.10",
        "Provides-Extra: tensorboard",
        "Classifier: Programming Language :: Python :: 3.13",
        "Project-URL: ",
    ):
        assert line in meta, line

    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=False)
    py = fresh / "bin" / "python"
    fresh_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = [p for p in site.getsitepackages() if "site-packages" in p]
    Path(fresh_site, "borrowed_dependencies.pth").write_text("\n".join(deps) + "\n")  # no .pth of theirs runs
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = fresh_shell_env(work)
    where = subprocess.run(
        [str(py), "-c", "import synapto; print(synapto.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.stdout.strip().startswith(fresh_site), where.stdout + where.stderr  # the wheel's, not the checkout
    run = subprocess.run(
        [
            str(fresh / "bin" / "synapto"),
            "evolve",
            "--config",
            "quickstart",
            "--generations",
            "2",
            "--population",
            "8",
            "--test-episodes",
            "2",
            "--select-episodes",
            "2",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    with h5py.File(work / "runs" / "quickstart.h5", "r") as f:
        assert int(f["completed"][0]) == 2 and f.attrs["config"].count("LunarLander-v3") == 1
    assert str(fresh / "bin" / "synapto") + " plot runs/quickstart.h5" in run.stdout
