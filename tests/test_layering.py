"""The package keeps its seams: each concern has one owner and arrows point down."""

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "synapto"
MODULES = sorted(PKG.rglob("*.py"))


def imports(path: Path) -> set[str]:
    """Every module name ``path`` imports (at any depth of its code)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def rel(path: Path) -> str:
    return str(path.relative_to(PKG.parent))


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_no_module_over_500_lines(path):
    assert len(path.read_text().splitlines()) <= 500


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_only_parallel_imports_mpi4py(path):
    if "parallel" not in path.parts:
        assert not any(m == "mpi4py" or m.startswith("mpi4py.") for m in imports(path))


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_no_private_agent_attributes_outside_agents(path):
    if "agents" in path.parts:
        return
    private = re.findall(r"\bagent\w*\._[a-z]\w*", path.read_text())
    assert not private, private


@pytest.mark.parametrize("low, high", [("synapto.store", "synapto.evolution"), ("synapto.ppo", "synapto.bench"),
                                       ("synapto.agents", "synapto.evolution"),
                                       ("synapto.parallel", "synapto.evolution"),
                                       ("synapto.store", "synapto.parallel"), ("synapto.agents", "synapto.store")])
def test_no_arrow_back_up(low, high):
    for path in PKG.joinpath(*low.split(".")[1:]).rglob("*.py"):
        assert not any(m == high or m.startswith(high + ".") for m in imports(path)), (rel(path), high)


def test_run_evolution_fits_on_a_screen():
    tree = ast.parse((PKG / "evolution" / "loop.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_evolution")
    assert fn.end_lineno - fn.lineno + 1 <= 60
