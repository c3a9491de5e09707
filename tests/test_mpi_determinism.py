"""The same command under 1, 2, 4 (and 64) MPI ranks writes bit-identical run files."""

import pytest
from conftest import assert_same_run, run_cli


def evolve(out, *args, ranks=None, timeout=300):
    proc = run_cli("evolve", *args, "--out", out, "--force", ranks=ranks, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


CARTPOLE = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--population",
    "12",
    "--generations",
    "3",
    "--episodes",
    "2",
    "--hidden",
    "4",
    "4",
    "--seed",
    "5",
    "--test-episodes",
    "6",
    "--validate-episodes",
    "3",
    # main 8e2a0e2's defaults, spelled: these cases were written for them
    "--strategy",
    "ga",
    "--validate-top",
    "0",
    "--select-episodes",
    "0",
    "--max-env-steps",
    "0",
]
BIPEDAL = [
    "--env",
    "BipedalWalker-v3",
    "--agent",
    "hebbian-dag",
    "--population",
    "6",
    "--generations",
    "2",
    "--episodes",
    "1",
    "--hidden",
    "4",
    "4",
    "--seed",
    "11",
    "--test-episodes",
    "2",
    "--validate-episodes",
    "3",
    "--strategy",
    "ga",
    "--validate-top",
    "0",
    "--select-episodes",
    "0",
    "--max-env-steps",
    "0",
]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("args", [CARTPOLE, pytest.param(BIPEDAL, marks=pytest.mark.long)], ids=["cartpole", "bipedal"])
def test_bit_identical_for_1_2_4_ranks(tmp_path, args):
    serial = tmp_path / "serial.h5"
    evolve(serial, *args)
    for ranks in (1, 2, 4):
        out = tmp_path / f"ranks{ranks}.h5"
        evolve(out, *args, ranks=ranks)
        assert_same_run(serial, out)


@pytest.mark.mpi
def test_workers_option_relaunches_under_mpiexec(tmp_path):
    serial, farm = tmp_path / "serial.h5", tmp_path / "farm.h5"
    evolve(serial, *CARTPOLE, "--agent", "pruned-mlp")
    proc = evolve(farm, *CARTPOLE, "--agent", "pruned-mlp", "--workers", "3")
    assert "3 workers ->" in proc.stdout
    assert_same_run(serial, farm)


def test_run_file_differs_when_the_seed_differs(tmp_path):
    # guards the comparison itself: different runs must not compare equal
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    other_seed = [("6" if x == "5" else x) for x in CARTPOLE]
    evolve(a, *CARTPOLE)
    evolve(b, *other_seed)
    with pytest.raises(AssertionError):
        assert_same_run(a, b)


@pytest.mark.mpi
@pytest.mark.long
def test_64_ranks_on_two_cores_equal_one_process(tmp_path):
    args = [
        "--env",
        "CartPole-v1",
        "--population",
        "64",
        "--generations",
        "2",
        "--episodes",
        "1",
        "--hidden",
        "4",
        "--seed",
        "2",
        "--test-episodes",
        "8",
    ]
    serial, wide = tmp_path / "serial.h5", tmp_path / "wide.h5"
    evolve(serial, *args)
    proc = evolve(wide, *args, ranks=64, timeout=600)
    assert "63 workers ->" in proc.stdout
    assert_same_run(serial, wide)
