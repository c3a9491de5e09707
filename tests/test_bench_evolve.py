"""The evolution benchmark's bookkeeping (never its timings).

Arithmetic (speed-up, efficiency, Amdahl, shares, the ceiling model, the farm
simulation) on made-up numbers; then one small ``bench evolve`` through the CLI
(BipedalWalker, real mpiexec) whose files must be complete and consistent, and whose
waves and dynamic runs must hold bit-identical results.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import _env, assert_same_run

from synapto.bench.common import amdahl, fit_amdahl, md_table, mean_std, shares, speedups
from synapto.bench.evolve.projection import simulate_farm
from synapto.bench.evolve.raw import ceiling
from synapto.bench.evolve.runs import PARTS, breakdown, loop_times, productive_share


# ----------------------------------------------------------------------------- arithmetic
def test_speedup_and_efficiency_are_paired_by_seed():
    times = {1: {13: 10.0, 7: 20.0}, 2: {13: 5.0, 7: 8.0}, 4: {13: 4.0}}
    sp = speedups(times)
    assert sp[1] == {"speedup": 1.0, "efficiency": 1.0, "baseline": 1}
    assert sp[2]["speedup"] == pytest.approx((10 / 5 + 20 / 8) / 2)
    assert sp[2]["efficiency"] == pytest.approx(sp[2]["speedup"] / 2)
    assert sp[4]["speedup"] == pytest.approx(10 / 4)  # only the seed both have
    # a one-process run (0 workers) is the baseline and counts as one worker
    sp0 = speedups({0: {1: 12.0}, 3: {1: 5.0}})
    assert sp0[0]["speedup"] == 1.0 and sp0[3]["speedup"] == pytest.approx(2.4)
    assert sp0[3]["efficiency"] == pytest.approx(0.8)
    # a baseline of 2 workers: speed-ups read "against one worker" assuming the baseline is ideal
    sp2 = speedups({2: {1: 10.0}, 4: {1: 6.0}})
    assert sp2[2]["speedup"] == 2.0 and sp2[4]["speedup"] == pytest.approx(2 * 10 / 6)


def test_amdahl_fit_recovers_the_serial_fraction():
    for f in (0.0, 0.05, 0.3, 1.0):
        points = {n: amdahl(f, n) for n in (1, 2, 4, 8)}
        assert fit_amdahl(points) == pytest.approx(f, abs=1e-12)
    assert amdahl(0.0, 64) == pytest.approx(64) and amdahl(1.0, 64) == pytest.approx(1)
    assert amdahl(0.1, 63) == pytest.approx(1 / (0.1 + 0.9 / 63))
    assert math.isnan(fit_amdahl({1: 1.0}))  # nothing above one worker
    assert fit_amdahl({2: 2.5}) == 0.0  # super-linear: clipped to [0, 1]
    assert fit_amdahl({2: 0.5}) == 1.0


def test_shares_sum_to_one_and_mean_std_is_population_std():
    s = shares({"a": 3.0, "b": 1.0, "c": 0.0})
    assert sum(s.values()) == pytest.approx(1.0) and s["a"] == pytest.approx(0.75)
    assert mean_std([2.0, 4.0]) == (3.0, 1.0)
    assert mean_std([5.0]) == (5.0, 0.0)
    assert "---:" in md_table(["a", "b"], [[1, 2]])


def _timing(G=3, seed=0):
    r = np.random.default_rng(seed)
    eval_wall = r.uniform(1, 2, G)
    validation = r.uniform(0.1, 0.3, G)
    update = r.uniform(0.001, 0.01, G)
    write = r.uniform(0.0, 0.002, G)
    wall = eval_wall + validation + update + write + r.uniform(0.001, 0.01, G)
    compute = 2 * eval_wall * r.uniform(0.8, 0.95, G)
    env = compute * 0.9
    agent = compute * 0.05
    idle = 2 * eval_wall * 0.01
    return {
        "wall": wall,
        "eval_wall": eval_wall,
        "worker_compute": compute,
        "worker_env": env,
        "worker_agent": agent,
        "worker_idle": idle,
        "validation": validation,
        "update": update,
        "write": write,
    }


def test_breakdown_parts_sum_to_the_worker_seconds():
    t = _timing()
    cycles = t["wall"] + np.array([0.05, 0.02, 0.04])  # checkpoint + log after the recorded wall
    for cyc in (None, cycles):
        parts = breakdown(t, 2, cyc)
        assert [k for k, _ in PARTS] == list(parts)
        expected = 2 * np.sum(t["wall"] if cyc is None else cyc)
        assert sum(parts.values()) == pytest.approx(expected, rel=1e-12)
        assert sum(shares(parts).values()) == pytest.approx(1.0)
        assert parts["env"] == pytest.approx(t["worker_env"].sum())
        assert parts["idle"] == pytest.approx(t["worker_idle"].sum())
        assert parts["update"] == pytest.approx(2 * t["update"].sum())
        assert parts["comm"] == pytest.approx(np.sum(2 * t["eval_wall"] - t["worker_compute"] - t["worker_idle"]))
    assert breakdown(t, 2, cycles)["write"] == pytest.approx(2 * np.sum(t["write"] + cycles - t["wall"]))
    # a one-process run counts as one worker; missing datasets count as zero
    one = breakdown({k: t[k] for k in ("wall", "eval_wall", "worker_compute")}, 0)
    assert sum(one.values()) == pytest.approx(t["wall"].sum())
    # the evaluating share: training compute plus validation at the training maps' efficiency
    parts = breakdown(t, 2)
    eff = t["worker_compute"].sum() / (2 * t["eval_wall"].sum())
    assert productive_share(parts, t, 2) == pytest.approx(
        (t["worker_compute"].sum() + parts["validation"] * eff) / sum(parts.values())
    )


def test_ceiling_model():
    raw = {
        "fresh": {"make": 0.4, "reset": 0.5, "close": 0.1, "step": 3.0, "episodes": 100, "steps": 10000},
        "reuse": {"make": 0.0, "reset": 0.2, "close": 0.0, "step": 3.0, "episodes": 100, "steps": 10000},
    }
    # 10 ms per episode, 300 us per step: 2000 episodes of 100 steps
    assert ceiling(raw, 200_000, 2000) == pytest.approx(200_000 / (2000 * 0.01 + 200_000 * 3e-4))
    assert ceiling(raw, 200_000, 2000, "reuse") == pytest.approx(200_000 / (2000 * 0.002 + 200_000 * 3e-4))
    assert ceiling(raw, 200_000, 2000, "reuse") > ceiling(raw, 200_000, 2000)


def test_loop_times_from_log_lines():
    lines = [
        (0.5, "warning: something"),
        (2.0, "synapto evolve: CartPole-v1, ..."),
        (3.5, "gen    0  50.0%  best 1"),
        (4.0, "testing the champion"),
        (5.25, "gen    1 100.0%  best 2"),
        (6.0, "done in 0:00:04"),
    ]
    assert loop_times(lines) == (2.0, [3.5, 5.25])
    assert loop_times([(1.0, "gen    0  50.0%  best 1")]) == (None, [])


def test_farm_simulation_dynamic_and_waves():
    tasks = [3.0, 1.0, 1.0, 1.0]
    assert simulate_farm(tasks, 2, "dynamic") == 3.0  # 3 | 1+1+1
    assert simulate_farm(tasks, 2, "waves") == 4.0  # max(3,1) + max(1,1)
    assert simulate_farm(tasks, 1, "dynamic") == 6.0 == simulate_farm(tasks, 1, "waves")
    assert simulate_farm(tasks, 8, "dynamic") == 3.0  # more workers than tasks
    assert simulate_farm(tasks, 2, "dynamic", per_task=0.5) == 4.5


# ----------------------------------------------------------------------------- one real benchmark
@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cmd = [
        sys.executable,
        "-m",
        "synapto",
        "bench",
        "evolve",
        "--env",
        "CartPole-v1",
        "--hidden",
        "4",
        "--population",
        "4",
        "--generations",
        "2",
        "--episodes",
        "1",
        "--seed",
        "3",
        "--workers-list",
        "0",
        "2",
        "--raw-steps",
        "300",
        "--out-dir",
        str(out),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"bench evolve timed out:\n{output}")
    assert proc.returncode == 0, output
    return out, output


@pytest.mark.long
@pytest.mark.mpi
@pytest.mark.slow
def test_bench_writes_a_consistent_table(bench_run):
    out, output = bench_run
    result = json.loads((out / "evolve_hebbian-dag.json").read_text())
    md = (out / "evolve_hebbian-dag.md").read_text()
    assert md.strip() in output  # printed as written
    for needle in (
        "| 0 | dynamic |",
        "| 2 | dynamic |",
        "| 2 | waves |",
        "Raw-environment ceiling",
        "Where the time goes",
        "Waves against dynamic",
        "Amdahl",
        "64 ranks",
        "identical",
    ):
        assert needle in md, needle
    rows = {(r["workers"], r["schedule"]): r for r in result["rows"]}
    assert set(rows) == {(0, "dynamic"), (2, "dynamic"), (2, "waves")}
    assert rows[(0, "dynamic")]["speedup"] == 1.0
    for r in result["rows"]:
        assert sum(r["shares"].values()) == pytest.approx(1.0)
        assert r["efficiency"] == pytest.approx(r["speedup"] / max(r["workers"], 1))
        assert r["steps_per_s_per_worker"] == pytest.approx(r["steps_per_s"] / max(r["workers"], 1))
        assert r["ratio"] > 0 and r["ratio_side_by_side"] > 0
    for run in result["runs"]:
        # every worker-second is accounted for: the parts add up to workers x generation times
        assert sum(run["parts"].values()) == pytest.approx(max(run["workers"], 1) * sum(run["cycles"]))
        assert run["env_steps"] > 0 and run["loop"] > 0
    assert result["identical"] and all(result["identical"].values())
    assert len(result["raw"]) == 2 and {r["processes"] for r in result["raw"]} == {1, 2}
    assert 0 <= result["projection"]["amdahl_serial_fraction"] <= 1
    assert {"23/dynamic", "39/waves", "63/dynamic"} <= set(result["projection"]["simulated_speedup"])


@pytest.mark.long
@pytest.mark.mpi
@pytest.mark.slow
def test_waves_give_the_same_results_as_dynamic_scheduling(bench_run):
    out, _ = bench_run
    runs = out / "runs"
    waves, dynamic = runs / "evolve_hebbian-dag_w2_waves_s3.h5", runs / "evolve_hebbian-dag_w2_dynamic_s3.h5"
    serial = runs / "evolve_hebbian-dag_w0_dynamic_s3.h5"
    with h5py.File(waves, "r") as a, h5py.File(dynamic, "r") as b:
        assert a["fitness"][()].tobytes() == b["fitness"][()].tobytes()
    assert_same_run(waves, dynamic)
    assert_same_run(serial, dynamic)


@pytest.mark.long
@pytest.mark.mpi
@pytest.mark.slow
def test_farm_time_accounting_is_consistent(bench_run):
    # on the coordinator's clock a worker holds a task over the whole of its compute,
    # so idle and communication are never negative, generation by generation
    out, _ = bench_run
    for path in (out / "runs").glob("evolve_*_w2_*.h5"):
        with h5py.File(path, "r") as f:
            t = {k: f["timing"][k][()] for k in f["timing"]}
        assert np.all(t["worker_idle"] >= 0)
        comm = 2 * t["eval_wall"] - t["worker_compute"] - t["worker_idle"]
        assert np.all(comm >= -1e-9), comm
        assert np.all(t["worker_env"] + t["worker_agent"] <= t["worker_compute"] + 1e-9)
