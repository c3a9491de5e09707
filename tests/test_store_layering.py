"""synapto.store owns the disk: the only package importing h5py, and a low layer."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "synapto"
#: what synapto.store may import from synapto besides itself and the ground floor
#: (synapto.common: errors, fault points, config files, noise keys, folder checks): the
#: rebuilding of stored GA genomes (lineages), PPO's config, and synapto.resources (limits),
#: a leaf beside synapto.common
STORE_MAY_IMPORT = {"synapto.ppo.config", "synapto.lineage", "synapto.resources"}


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from synapto import faults`` counts as synapto.common.faults)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if node.module == "synapto")
    return out


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_the_store_imports_h5py(path):
    if path.is_relative_to(PACKAGE / "store"):
        return
    assert not {m for m in imports(path) if m == "h5py" or m.startswith("h5py.")}


def test_the_store_is_a_low_layer():
    for path in sorted((PACKAGE / "store").rglob("*.py")):
        upward = {
            m
            for m in imports(path)
            if m.startswith("synapto")
            and not m.startswith(("synapto.store", "synapto.common"))
            and m != "synapto"
            and m not in STORE_MAY_IMPORT
        }
        assert not upward, f"{path.name} imports {sorted(upward)}"
