"""The front page cannot drift from the code: every shell command and Python block README.md
shows runs here (the long ones on a tiny budget, ``make install`` and ``make test`` as dry
runs), its links resolve, and it stays a front page.  The Python API guide's example
(docs/api.md) runs as written too."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import ROOT, _env

README = ROOT / "README.md"

#: make evolve's shipped config cut to seconds (appended to its FORCE= flags)
TINY_EVOLVE = (
    "--force --generations 2 --population 8 --validate-episodes 2 --select-episodes 2 "
    "--test-episodes 2 --env-option max_episode_steps=100"
)

#: how the test runs the front page's commands that take long: a README command -> the command
#: run instead ({make}, {py}, {root} filled in).  Every other command runs as written, with
#: .venv/bin/python as this interpreter.
INSTEAD = {
    "make install": "{make} -n -W setup.cfg -C {root} install",  # what it would install
    "make test": "{make} -n -o install -C {root} test",  # what it would run
    "make evolve": "{make} -o install -f {root}/Makefile evolve PY={py} FORCE='" + TINY_EVOLVE + "'",
}


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def commands(block: str) -> list[str]:
    """The commands of a shell block: comments dropped, continued lines joined."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def front_page_commands() -> list[str]:
    return [c for b in blocks(README.read_text(), "bash") for c in commands(b)]


def as_run(command: str) -> str:
    make = shutil.which("make")
    assert make, "make is needed for `make test` anyway"
    template = INSTEAD.get(command)
    if template is not None:
        return template.format(make=make, py=shlex.quote(sys.executable), root=shlex.quote(str(ROOT)))
    assert command.startswith(".venv/bin/python -m synapto "), f"README command the test cannot run: {command}"
    return shlex.quote(sys.executable) + command[len(".venv/bin/python") :]


def test_front_page_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert blocks(text, "bash") and len(blocks(text, "python")) == 1
    assert set(INSTEAD) <= set(front_page_commands())  # no stand-in for a command the page no longer shows
    for command in front_page_commands():
        as_run(command)  # each one is known: run as written, or by its stand-in


def test_front_page_links_resolve():
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), f"README.md links to {target}, which is not in the repository"


@pytest.mark.mpi
def test_front_page_commands_run(tmp_path):
    """In README order, in a folder of their own: make evolve (tiny) writes the run file the
    plot, render and replay commands after it read."""
    said = {}
    for command in front_page_commands():
        proc = subprocess.run(
            as_run(command), shell=True, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        said[command] = proc.stdout
    assert re.search(r'pip install -e "\.\[[^\]]*\bdocs\b[^\]]*\]"', said["make install"])  # every extra
    assert "-m pytest" in said["make test"] and '-m "not long"' in said["make test"]
    evolve = said["make evolve"]
    assert "--config quickstart --workers 2 --force" in evolve and "champion test:" in evolve
    with h5py.File(tmp_path / "runs" / "quickstart.h5", "r") as f:
        assert int(f["completed"][0]) == 2 and f["champion/test_returns"].shape == (2,)
    assert (tmp_path / "runs" / "quickstart_curves.png").stat().st_size > 0
    assert (tmp_path / "runs" / "quickstart_champion.gif").stat().st_size > 0
    assert "5/5 bit-identical" in said[next(c for c in said if " replay " in c)]


def test_front_page_python_runs_and_prints_what_it_says(tmp_path):
    (code,) = blocks(README.read_text(), "python")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "True"  # the first test episode, replayed, gives the stored return
    with h5py.File(tmp_path / "runs" / "python_api.h5", "r") as f:
        assert int(f["completed"][0]) == 5
        test_mean = float(f["champion/test_returns"][()].mean())
    assert lines[-2] == f"5 {test_mean}"  # one callback call per generation; the summary's test mean


def api_guide_example() -> str:
    found = blocks((ROOT / "docs" / "api.md").read_text(), "python")
    assert len(found) == 1, "the Python API page has one example"
    return found[0]


def test_api_guide_example_runs(tmp_path):
    code = api_guide_example() + "\nprint('state keys', sorted(state))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "state keys ['arrays', 'best', 'rng', 'scalars', 'search']"
    assert float(lines[-2]) > -10 * 0.5  # the sphere search got near its optimum (start: -10)
    lines = lines[:-1]
    with h5py.File(tmp_path / "runs" / "api_cartpole.h5", "r") as f:  # the run the example made
        test_mean = float(f["champion/test_returns"][()].mean())
        assert f["champion/test_returns"].shape == (10,) and int(f["completed"][0]) == 5
    assert float(lines[-3]) == test_mean  # print(summary.test_mean) is the file's test mean
    fitness, generation = lines[-2].split()
    assert np.isfinite(float(fitness)) and 0 <= int(generation) < 5


def test_docs_hold_every_strategys_options_table():
    from synapto.evolution.strategies import STRATEGIES, options_table

    doc = (ROOT / "docs" / "strategies.md").read_text()
    for name in STRATEGIES:
        assert f"## {name}\n" in doc and options_table(name) in doc, name


def test_the_docs_site_lists_every_page():
    """mkdocs.yml's nav names every page of docs/ and each page it names exists (make docs
    fails on either too; this says so in make test, without the docs tools)."""
    nav = re.findall(r":\s*(\S+\.md)\s*$|^\s*-\s+(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    named = {a or b for a, b in nav}
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert named - {"index.md"} == pages, (named ^ pages) - {"index.md"}
    assert "index.md" not in pages  # the home page is README.md (scripts/docs_site.py)
