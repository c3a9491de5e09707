"""The Python API as type checkers and IDEs see it: ``synapto.X`` has the type of
``synapto.api.X`` (the package ships ``py.typed``), while ``import synapto`` stays quick."""

import subprocess
import sys

import pytest
from conftest import ROOT, _env

import synapto

SNIPPET = """\
import synapto

cfg = synapto.EvolveConfig(populaton=8)
reveal_type(synapto.load_policy)
reveal_type(synapto.evolve(synapto.EvolveConfig(), "a.h5").test_mean)
"""


@pytest.mark.slow
@pytest.mark.long  # mypy over the package: make test-long (CI runs both)
def test_mypy_sees_the_api_and_refuses_a_misspelt_field(tmp_path):
    """synapto as an installed package (on the path, not a source): without ``py.typed``
    mypy skips it, and without the names it serves lazily every one of them is ``Any``."""
    pytest.importorskip("mypy")
    (tmp_path / "snippet.py").write_text(SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "snippet.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stdout.splitlines()
    assert [line for line in lines if ": error:" in line] == [
        'snippet.py:3: error: Unexpected keyword argument "populaton" for "EvolveConfig"; '
        'did you mean "population"?  [call-arg]'
    ], proc.stdout + proc.stderr
    assert "-> synapto.policies.LoadedPolicy | synapto.policies.PPOPolicy" in lines[1]
    assert lines[2].endswith('Revealed type is "float | None"') or lines[2].endswith('"builtins.float | None"')


def test_a_misspelt_field_is_a_type_error_when_run():
    with pytest.raises(TypeError, match="unexpected keyword argument 'populaton'"):
        synapto.EvolveConfig(populaton=8)  # type: ignore[call-arg]


def test_every_public_name_is_declared_and_import_synapto_loads_nothing_else():
    assert (ROOT / "synapto" / "py.typed").is_file()
    code = (
        "import sys, synapto\n"
        "print(sorted(m for m in sys.modules if m.startswith(('synapto.', 'numpy', 'typing'))))\n"
        "print(sorted(synapto.__all__))\n"
        "import synapto.api as api\n"
        "print(all(getattr(synapto, n) is getattr(api, n) for n in synapto.__all__ if n != '__version__'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120)
    loaded, names, same = proc.stdout.splitlines()
    assert loaded == "[]"  # the API loads on first use
    assert names == str(sorted([*synapto.api.__all__, "__version__"])) and same == "True"
