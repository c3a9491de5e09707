"""The package keeps its seams: each concern has one owner and arrows point down."""

import ast
import re
import subprocess
import sys
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


@pytest.mark.parametrize(
    "low, high",
    [
        ("synapto.store", "synapto.evolution"),
        ("synapto.ppo", "synapto.bench"),
        ("synapto.agents", "synapto.evolution"),
        ("synapto.parallel", "synapto.evolution"),
        ("synapto.store", "synapto.parallel"),
        ("synapto.agents", "synapto.store"),
    ],
)
def test_no_arrow_back_up(low, high):
    for path in PKG.joinpath(*low.split(".")[1:]).rglob("*.py"):
        assert not any(m == high or m.startswith(high + ".") for m in imports(path)), (rel(path), high)


def test_run_evolution_fits_on_a_screen():
    tree = ast.parse((PKG / "evolution" / "loop.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_evolution")
    assert fn.end_lineno - fn.lineno + 1 <= 60


# ----------------------------------------------------------------------------- the import graph
def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


NAMES = {module_name(p): p for p in MODULES}


def module_imports(path: Path) -> set[str]:
    """The modules of synapto that ``path`` imports: at module level, inside functions and
    under ``if TYPE_CHECKING``, absolute or relative; ``from package import name`` is an
    arrow to ``package.name`` where that is a module, else to ``package``."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            named.update(f"{base}.{a.name}" if f"{base}.{a.name}" in NAMES else base for a in node.names)
    out = set()
    for name in named:
        while name and name not in NAMES:  # synapto.x.y.Class -> synapto.x.y; numpy -> ""
            name = name.rpartition(".")[0]
        if name and name != me:
            out.add(name)
    return out


GRAPH = {name: module_imports(path) for name, path in NAMES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's circles: its strongly connected components of more than one module
    (Tarjan's algorithm, iterative), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": {"g"}, "g": {"f"}}
    assert cycles(graph) == [["a", "b", "c"], ["f", "g"]]


def test_no_import_cycle():
    """Arrows point one way: no module of synapto imports, however indirectly, a module
    that imports it back (function-level imports count: they only defer the circle)."""
    found = cycles(GRAPH)
    assert not found, "import circles:\n" + "\n".join(
        "  " + ", ".join(c) + "\n    " + "; ".join(f"{m} -> {', '.join(sorted(GRAPH[m] & set(c)))}" for m in c)
        for c in found
    )


def package_of(name: str) -> str:
    """``synapto.evolution.worker.tasks`` -> ``synapto.evolution``; a root module stays itself."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or PKG.joinpath(*parts[1:2]).is_dir() else name


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to synapto's packages (a root module is its own package)."""
    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        me = package_of(name)
        out.setdefault(me, set()).update(package_of(t) for t in targets if package_of(t) != me)
    return out


def test_packages_are_found():
    graph = {
        "synapto.ppo.train": {"synapto.tracking.callbacks", "synapto.ppo.nn"},
        "synapto.tracking": {"synapto.envs"},
    }
    assert package_graph(graph) == {"synapto.ppo": {"synapto.tracking"}, "synapto.tracking": {"synapto.envs"}}


def test_no_package_cycle():
    """Packages form no circle either: no module of a package imports, however indirectly, a
    module of a package that imports the first (so a package can be read, tested and moved
    with what it stands on, and nothing above it)."""
    graph = package_graph(GRAPH)
    found = cycles(graph)
    assert not found, "package circles:\n" + "\n".join(
        "  " + ", ".join(c) + "\n    " + "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c)
        for c in found
    )


@pytest.mark.parametrize("low, high", [("synapto.ppo", "synapto.evolution"), ("synapto.evolution", "synapto.ppo")])
def test_ppo_and_evolution_are_siblings(low, high):
    """PPO and evolution share what stands below them (tracking, the store, the farm, envs)
    and never import each other."""
    wrong = sorted(
        (m, t) for m in GRAPH if package_of(m) == low for t in GRAPH[m] if t == high or t.startswith(high + ".")
    )
    assert not wrong, wrong


#: the coordinator's side of evolution, and the run store: a worker rank runs none of it
COORDINATOR_SIDE = (
    "synapto.evolution.loop",
    "synapto.evolution.generation",
    "synapto.evolution.strategies",
    "synapto.evolution.champion",
    "synapto.evolution.command",
    "synapto.evolution.replay",
    "synapto.tracking",
    "synapto.evolution.progress",
    "synapto.evolution.config",
    "synapto.store",
)


@pytest.mark.parametrize("path", sorted(PKG.joinpath("evolution", "worker").rglob("*.py")), ids=rel)
def test_worker_imports_nothing_of_the_coordinator(path):
    wrong = sorted(m for m in module_imports(path) if any(m == c or m.startswith(c + ".") for c in COORDINATOR_SIDE))
    assert not wrong, (rel(path), wrong)


def test_farm_results_stand_alone():
    """The types every farm and its callers share sit below the farms."""
    wrong = sorted(m for m in module_imports(PKG / "parallel" / "results.py") if m.startswith("synapto.parallel"))
    assert not wrong, wrong


# ----------------------------------------------------------------------------- lazy imports
#: the libraries a function may import when it needs them: heavy or optional ones (the extras:
#: plot, tune, tensorboard, onnx, envpool, mujoco, the race's torch and SB3), the command line's
#: (a worker rank and the Python API never load them), h5py and gymnasium (slow to load: the
#: commands that never open a run file or an env start without them), and mpi4py (it starts MPI)
LAZY_LIBRARIES = {
    "matplotlib", "imageio", "imageio_ffmpeg", "av", "optuna", "tensorboardX", "onnx", "onnxruntime", "envpool",
    "mujoco", "torch", "stable_baselines3", "sb3_contrib", "typer", "rich", "threadpoolctl", "h5py", "gymnasium",
    "mpi4py",
}  # fmt: skip
#: the modules of synapto a function of the given file may import, with the reason
LAZY_INTERNAL = {
    ("synapto/__init__.py", "synapto.api"): "`import synapto` loads nothing: the API loads on first use",
    **{
        ("synapto/tune/cli.py", m): "they import optuna (the tune extra): the command line and tune -h load without it"
        for m in ("synapto.tune.report", "synapto.tune.study", "synapto.tune.trial")
    },
}


def lazy_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import inside a function of ``path`` (``if TYPE_CHECKING``
    blocks aside), relative imports made absolute, ``from package import module`` as the module."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, a.name) for a in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                found.extend(
                    (child.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in NAMES else base) for a in child.names
                )
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text()), False)
    return found


def is_command_module(path: Path) -> bool:
    """``path`` defines ``register`` at its top level (the commands it adds to synapto.cli's app)."""
    return any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in ast.parse(path.read_text()).body)


def test_command_modules_are_the_ones_synapto_cli_registers():
    found = sorted(rel(p) for p in MODULES if is_command_module(p))
    assert "synapto/evolution/cli.py" in found and "synapto/ppo/cli.py" in found and "synapto/cli.py" not in found
    registered = GRAPH["synapto.cli"] | GRAPH["synapto.bench.race"]
    assert {module_name(PKG.parent / f) for f in found} <= registered, found


def modules_loaded_by(code: str) -> set[str]:
    """The modules of synapto that a fresh interpreter has loaded after ``code``."""
    code += "; import sys; print(' '.join(m for m in sys.modules if m.startswith('synapto')))"
    return set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())


#: the work of the commands: what building the command line must not load
WORK = {
    "synapto.evolution.loop",
    "synapto.evolution.generation",
    "synapto.parallel.coordinator",
    "synapto.ppo.train",
    "synapto.viz.draw",
    "synapto.bench.race.racing",
    "synapto.tune.study",
}


def test_the_command_list_loads_the_options_of_every_command_and_no_work():
    loaded = modules_loaded_by("import synapto.cli as c; c.build_app([])")
    assert {"synapto.evolution.cli", "synapto.ppo.cli", "synapto.bench.race.cli", "synapto.tune.cli"} <= loaded
    assert not loaded & WORK, sorted(loaded & WORK)


def test_a_command_loads_its_own_options_only():
    """Every process start (each MPI rank of a run) builds the command line for its command."""
    loaded = modules_loaded_by("import synapto.cli as c; c.build_app(['-q', 'ppo', '--hid', '8'])")
    assert "synapto.ppo.cli" in loaded
    others = {m for m in loaded if m.startswith(("synapto.bench", "synapto.evolution", "synapto.viz", "synapto.tune"))}
    assert not others and not loaded & WORK, sorted(others | (loaded & WORK))


def test_lazy_imports_are_found():
    assert [m for _, m in lazy_imports(PKG / "__init__.py")] == ["synapto.api"]


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_imports_inside_functions_follow_the_rule(path):
    """An import stands at the top of its module, where a reader sees what the module stands
    on and a circle shows at once.  A function imports only (a) a library of
    :data:`LAZY_LIBRARIES` (heavy or optional: what a command does not use it neither loads
    nor needs installed), (b) a module of synapto that :data:`LAZY_INTERNAL` names for its file,
    with the reason, (c) in synapto.cli and in a command module (one that defines
    ``register(app)``), any module of synapto: synapto.cli loads a command's module when that
    command runs (all of them for the list of commands), and a command module loads the work
    of a command when it runs, so each process (each MPI rank) pays only for its own command.
    The standard library and numpy load at the top."""
    if is_command_module(path) or rel(path) == "synapto/cli.py":
        return
    wrong = [
        f"line {line}: {name}"
        for line, name in lazy_imports(path)
        if name.split(".")[0] not in LAZY_LIBRARIES and (rel(path), name) not in LAZY_INTERNAL
    ]
    assert not wrong, f"{rel(path)} imports inside functions: {'; '.join(wrong)}"


def test_lazy_internal_entries_are_used():
    """Every exception is still needed (a stale one would let a newcomer in)."""
    for file, name in LAZY_INTERNAL:
        assert name in [m for _, m in lazy_imports(PKG.parent / file)], (file, name)


# ----------------------------------------------------------------------------- function length
#: a function's lines, its signature included (options are declared as dataclass fields,
#: synapto.common.declare, so no command's parameter list is an exception)
MAX_FUNCTION_LINES = 60


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """``(name, lines)`` of every function in ``path``, methods and nested functions included."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_function_lengths_count_the_signature(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def f(\n    a,\n    b,\n):\n    return a\n\n\nclass C:\n    def m(self):\n        pass\n")
    assert function_lengths(path) == [("f", 5), ("m", 2)]


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_no_function_over_60_lines(path):
    long = [f"{name} ({n} lines)" for name, n in function_lengths(path) if n > MAX_FUNCTION_LINES]
    assert not long, f"{rel(path)}: {', '.join(long)}"
