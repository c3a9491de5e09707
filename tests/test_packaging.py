"""What the distribution says about itself: its metadata, its extras where they are
listed, the documents the docs and configs cite, and the budget they give the default
experiment."""

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def extras() -> list[str]:
    return list(setup_cfg()["options.extras_require"])


def test_the_licence_is_an_spdx_expression_without_a_classifier():
    """setuptools warns at every install about a licence classifier beside ``license``."""
    meta = setup_cfg()["metadata"]
    assert meta["license"] == "MIT"
    assert not [c for c in meta["classifiers"].splitlines() if c.strip().startswith("License ::")]


def test_every_extra_is_listed_where_the_extras_are_listed():
    names = extras()
    assert {"mpich", "plot", "tensorboard", "mujoco", "tune", "onnx", "envpool", "dev"} <= set(names)
    assert "docs/install.md" in (ROOT / "README.md").read_text()  # the front page points to the list
    install = (ROOT / "docs" / "install.md").read_text()
    for name in names:
        assert f"| `{name}` |" in install, name


def test_the_documents_the_docs_and_configs_cite_exist():
    """Markdown links, ``docs/X.md`` and upper-case ``NAME.md`` mentions point at files."""
    texts = [ROOT / "README.md", ROOT / "synapto" / "defaults.toml", *(ROOT / "docs").glob("*.md")]
    texts += [*(ROOT / "experiments").glob("*.toml"), *(ROOT / "synapto").rglob("*.py")]
    missing = []
    for path in texts:
        text = path.read_text()
        for target in re.findall(r"\]\(([^)#\s]+\.md)", text):
            if not (path.parent / target).exists() and not (ROOT / target).exists():
                missing.append((path.name, target))
        for target in re.findall(r"\b((?:docs/)?[A-Z][A-Z_]+\.md|docs/[a-z_]+\.md)\b", text):
            if target != "NAME.md" and not (ROOT / target).exists():  # NAME.md: an output's placeholder
                missing.append((path.name, target))
    assert missing == []


def test_the_default_experiments_budget_is_the_one_check_reports():
    """Every sentence that gives the default experiment's budget gives ``max-env-steps``."""
    from synapto import defaults
    from synapto.evolution.cli import EVOLVE_HELP
    from synapto.evolution.config import EVOLVE_KEYS

    budget = defaults.values(EVOLVE_KEYS)["max_env_steps"] / 1e6
    texts = [(ROOT / "docs" / "cli.md").read_text(), EVOLVE_HELP, defaults.PATH.read_text()]
    found = [float(m) for t in texts for m in re.findall(r"defaults\.toml.{0,300}?\b([\d.]+) M env steps", t, re.S)]
    assert len(found) >= 2 and set(found) == {budget}


#: the extras' top-level packages: none of them is in a minimal install (``pip install -e .``)
EXTRA_MODULES = ("matplotlib", "imageio", "tensorboardX", "mujoco", "optuna", "onnx", "onnxruntime", "envpool")


def test_the_minimal_install_runs_the_quickstart_as_docs_install_shows(tmp_path):
    """docs/install.md's minimal install: its command runs with every extra's package missing
    (a real one was tried: python3 -m venv, pip install -e ., about 25 packages)."""
    import subprocess
    import sys

    from conftest import _env

    section = (ROOT / "docs" / "install.md").read_text().split("## The minimal install", 1)[1].split("\n## ", 1)[0]
    assert "pip install -e ." in section
    command = re.search(r"python -m synapto (evolve --config quickstart[^\n]*)", section).group(1).split()
    block = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {EXTRA_MODULES!r}:\n"
        "            raise ImportError(f'No module named {name!r} (an extra)')\n"
        "sys.meta_path.insert(0, Missing())\n"
        "import runpy\n"
        f"sys.argv = ['synapto', *{command!r}]\n"
        "runpy.run_module('synapto', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 1 run(s): openai-es on LunarLander-v3, pruned-mlp [16]")
