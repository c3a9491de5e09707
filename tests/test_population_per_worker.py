"""``--population-per-worker N`` (config: ``population-per-worker = N``): the population is
N x the workers (x 1 in a serial run), resolved once at the start and recorded in the run
file, so that ``--resume``, replay and the resolved config on any number of ranks compute
the same run."""

from __future__ import annotations

import dataclasses
import json

import h5py
import pytest
from conftest import assert_same_run, run_cli

RUN = ["--env", "CartPole-v1", "--episodes", "2", "--hidden", "4", "--seed", "8", "--test-episodes", "4"]


def recorded(out) -> dict:
    """The config the run file records."""
    with h5py.File(out, "r") as f:
        return json.loads(f.attrs["config"])


def call(capsys, *args):
    """``python -m synapto <args>`` in this process: ``(exit code, stdout, stderr)``."""
    from synapto.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.mpi
def test_resolved_once_recorded_and_the_same_run_on_1_and_3_ranks(tmp_path, capsys):
    from synapto.api import evolve
    from synapto.evolution.config import EvolveConfig

    out = tmp_path / "three.h5"
    proc = run_cli("evolve", *RUN, "--population-per-worker", "3", "--workers", "2", "--generations", "2", "--out", out)
    assert proc.returncode == 0, proc.stderr
    config = recorded(out)
    assert (config["population"], config["population_per_worker"]) == (6, 3)  # 3 per worker x 2 workers
    # the resolved config on one rank: the same run
    resolved = EvolveConfig.from_json(json.dumps(config))
    one = tmp_path / "one.h5"
    evolve(resolved, one, log=lambda s: None)
    assert_same_run(out, one)
    # resumed under another number of workers (none): the recorded population goes on
    code, _, err = call(capsys, "evolve", "--resume", out, "--generations", "3")
    assert code == 0, err
    assert (recorded(out)["population"], recorded(out)["population_per_worker"]) == (6, 3)
    longer = tmp_path / "longer.h5"
    evolve(dataclasses.replace(resolved, generations=3), longer, log=lambda s: None)
    assert_same_run(out, longer)
    # naming the share again under other workers would change the run: refused
    code, _, err = call(capsys, "evolve", "--resume", out, "--population-per-worker", "4", "--workers", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "population: 6 (run file) vs 4" in err, err


def test_a_serial_run_counts_one_worker_and_a_config_file_resolves_with_its_workers(tmp_path, capsys):
    out = tmp_path / "serial.h5"
    code, _, err = call(capsys, "evolve", *RUN, "--population-per-worker", "4", "--generations", "1", "--out", out)
    assert code == 0, err
    assert (recorded(out)["population"], recorded(out)["population_per_worker"]) == (4, 4)
    config = tmp_path / "c.toml"
    config.write_text('env = "CartPole-v1"\npopulation-per-worker = 4\nworkers = 3\n')
    code, stdout, _ = call(capsys, "evolve", "--config", config, "--check", "--out", tmp_path / "x.h5")
    assert code == 0 and "population 12 (4 per worker)" in stdout
    code, stdout, _ = call(
        capsys, "evolve", "--config", config, "--check", "--out", tmp_path / "x.h5", "--population", "10"
    )
    assert code == 0 and "population 10 ->" in stdout  # the command line's population wins over the file's share
    from synapto.evolution.config import EvolveConfig

    assert EvolveConfig.from_toml(config).population == 12


def test_a_run_that_gives_its_population_records_no_share():
    from synapto.evolution.config import EvolveConfig

    assert "population_per_worker" not in json.loads(EvolveConfig(env="CartPole-v1").to_json())


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--population-per-worker", "0"], "--population-per-worker must be an integer >= 1, got 0"),
        (["--population-per-worker", "-3"], "--population-per-worker must be an integer >= 1, got -3"),
        (["--population-per-worker", "1"], "--population-per-worker 1 x 1 worker(s) is a population of 1"),
        (["--population-per-worker", "4", "--population", "8"], "--population and --population-per-worker exclude"),
        (["--config", "BOTH"], "--population and --population-per-worker exclude"),
    ],
)
def test_bad_values_give_one_line_and_exit_2(tmp_path, capsys, args, needle):
    both = tmp_path / "both.toml"
    both.write_text('env = "CartPole-v1"\npopulation = 8\npopulation-per-worker = 4\n')
    args = [str(both) if a == "BOTH" else a for a in args]
    out = tmp_path / "runs" / "r.h5"
    code, _, err = call(capsys, "evolve", *RUN, *args, "--generations", "1", "--out", out)  # short, were it to run
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert not (tmp_path / "runs").exists()  # nothing written
