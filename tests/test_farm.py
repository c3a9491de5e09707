"""The task farm: a coordinator that never waits for a busy worker, noise keys over the
wire, evaluation phases split into episodes, compact run files and older files.

Run as a script under mpiexec (``python tests/test_farm.py CASE OUT``) for the farm's own
cases; the rest runs the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import MPIEXEC, _env, assert_same_run, run_cli

DATA = Path(__file__).parent / "data"


# -- the farm itself (under mpiexec) -----------------------------------------------
class Sleeper:
    """A handler that sleeps ``payload[0]`` seconds and returns ``len(payload[1])``."""

    def build(self):
        return self

    def __call__(self, payload):
        time.sleep(payload[0])
        return len(payload[1])


#: task 0 (worker 1) sleeps 2 s; task 2 -- worker 1's prefetched task -- is 1 MB; the
#: others are short, so worker 2 runs them while worker 1 is busy
SLOW, BIG = 0, 2


def _tasks():
    return [(2.0 if i == SLOW else 0.02, b"x" * ((1 << 20) if i == BIG else 100)) for i in range(12)]


def _busy_worker(out: str) -> None:
    from synapto.parallel.farm import make_farm

    farm, coordinator = make_farm()
    if not coordinator:
        return
    farm.setup(Sleeper())
    tasks = _tasks()
    res = farm.map(tasks)
    farm.close()
    np.savez(out, order=np.array(res.stats.order), values=np.array(res), sizes=[len(t[1]) for t in tasks])


@pytest.mark.mpi
def test_a_large_payload_for_a_busy_worker_delays_no_other_worker(tmp_path):
    """Worker 1 sleeps through task 0 while the coordinator hands it task 2 (1 MB) in
    advance.  A coordinator that waited in that send (MPI's rendezvous waits for the
    busy receiver) would serve worker 2 nothing more until task 0 ended; here every
    short task arrives before task 0 does."""
    out = tmp_path / "order.npz"
    proc = subprocess.run(
        [MPIEXEC, "-n", "3", sys.executable, __file__, "busy", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    r = np.load(out)
    order = r["order"].tolist()
    assert r["values"].tolist() == r["sizes"].tolist()  # results by index
    short = [i for i in range(12) if i not in (SLOW, BIG)]
    assert all(order.index(i) < order.index(SLOW) for i in short), order


# -- noise keys over the wire --------------------------------------------------------
LUNAR = [
    "--env",
    "LunarLander-v3",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "6",
    "--population",
    "8",
    "--generations",
    "3",
    "--episodes",
    "1",
    "--validate-top",
    "2",
    "--validate-episodes",
    "3",
    "--select-episodes",
    "2",
    "--test-episodes",
    "2",
    "--seed",
    "5",
]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize(
    "strategy, extra",
    [
        ("openai-es", ["--obs-norm"]),
        ("pgpe", []),
        ("cmaes", ["--strategy-option", "separable=true"]),
    ],
)
def test_noise_keys_over_the_wire_equal_genomes_for_any_rank_count(tmp_path, strategy, extra):
    """The run file of a run whose tasks carry noise keys equals, bit for bit, the one of
    the same command sending whole genomes, under 3 and 5 ranks (and in one process, which
    evaluates the genomes it holds whatever --wire says)."""
    args = [*LUNAR, "--strategy", strategy, *extra]
    ref = tmp_path / "genomes.h5"
    assert run_cli("evolve", *args, "--wire", "genomes", "--out", ref).returncode == 0
    for ranks in (1, 3, 5) if strategy == "openai-es" else (3,):
        got = tmp_path / f"keys{ranks}.h5"
        res = run_cli("evolve", *args, "--wire", "keys", "--out", got, ranks=ranks if ranks > 1 else None)
        assert res.returncode == 0, res.stderr
        assert_same_run(ref, got)


@pytest.mark.mpi
def test_batched_chunks_of_noise_keys_equal_genomes(tmp_path):
    """CartPole evaluated in lockstep chunks whose genomes workers rebuild from keys."""
    args = [
        "--env",
        "CartPole-v1",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "4",
        "--population",
        "16",
        "--generations",
        "2",
        "--episodes",
        "2",
        "--strategy",
        "openai-es",
        "--validate-top",
        "2",
        "--validate-episodes",
        "2",
        "--test-episodes",
        "2",
        "--seed",
        "3",
    ]
    ref, got = tmp_path / "genomes.h5", tmp_path / "keys.h5"
    assert run_cli("evolve", *args, "--wire", "genomes", "--out", ref).returncode == 0
    res = run_cli("evolve", *args, "--out", got, ranks=3)
    assert res.returncode == 0, res.stderr
    assert_same_run(ref, got)


# -- episodes of a phase apart ---------------------------------------------------------
class NaNRewardCartPole:
    """CartPole whose episode of reset seed 2 pays a NaN reward on its 3rd step."""

    @staticmethod
    def make():
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv
        from gymnasium.wrappers import TimeLimit

        class Env(CartPoleEnv):
            def reset(self, *, seed=None, options=None):
                self._bad, self._t = seed == 2, 0
                return super().reset(seed=seed, options=options)

            def step(self, action):
                obs, reward, term, trunc, info = super().step(action)
                self._t += 1
                return obs, (float("nan") if self._bad and self._t == 3 else reward), term, trunc, info

        return TimeLimit(Env(), 200)


@pytest.mark.parametrize("seeds", [[5, 1, 7, 3], [5, 1, 2, 7, 3]])
def test_episodes_evaluated_apart_merge_into_the_evaluation_of_all(seeds):
    """merge_episodes of one task per episode equals evaluate() of all the episodes in one
    task -- also when an episode in the middle is non-finite (the evaluation stops there:
    the later episodes count 0 return and 0 steps)."""
    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.worker.evaluate import evaluate
    from synapto.evolution.worker.tasks import merge_episodes

    agent = build_agent(EvolveConfig(env="CartPole-v1", agent="pruned-mlp", hidden=[4]))
    genome = np.random.default_rng(0).standard_normal(agent.n_params)
    seeds = np.array(seeds)
    whole = evaluate(agent, NaNRewardCartPole.make, genome, seeds, want_stats=False)
    parts = [
        evaluate(agent, NaNRewardCartPole.make, genome, seeds[e : e + 1], want_stats=False) for e in range(len(seeds))
    ]
    merged = merge_episodes(parts, agent.penalty(genome))
    assert merged.fitness == whole.fitness and merged.nonfinite == whole.nonfinite
    assert np.array_equal(merged.returns, whole.returns, equal_nan=True)
    assert np.array_equal(merged.steps, whole.steps)
    if 2 in seeds:  # the case is what it claims to be
        assert whole.nonfinite and np.isnan(whole.returns[2]) and whole.returns[3] == 0 == whole.steps[3]
    else:
        assert np.isfinite(whole.fitness)


def test_a_phase_deals_one_task_per_candidate_and_episode(tmp_path):
    """Validation of 2 candidates on 5 episodes is 10 tasks (so 10 workers can share it);
    the selection of the final candidates likewise."""
    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.loop import run_evolution
    from synapto.parallel.farm import SerialFarm

    class Counting(SerialFarm):
        def __init__(self):
            super().__init__()
            self.sizes = []

        def map(self, payloads, **kw):
            self.sizes.append(len(payloads))
            return super().map(payloads, **kw)

    cfg = EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=[4],
        population=6,
        generations=2,
        strategy="openai-es",
        validate_top=2,
        validate_episodes=5,
        select_episodes=3,
        test_episodes=4,
        seed=1,
    )
    farm = Counting()
    run_evolution(cfg, tmp_path / "r.h5", farm, log=lambda s: None, options=_unbatched())
    # per generation: 6 training tasks, 2 x 5 validation tasks; then selection, then 4 test tasks
    assert farm.sizes[:4] == [6, 10, 6, 10]
    assert farm.sizes[-1] == 4 and farm.sizes[-2] % 3 == 0 and farm.sizes[-2] >= 6


def _unbatched():
    from synapto.evolution.loop import RunOptions

    return RunOptions(batch="off")


class CountingCartPole:
    """CartPole counting its resets (episodes begun) in :data:`EPISODES`."""

    @staticmethod
    def make(render_mode=None):
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv
        from gymnasium.wrappers import TimeLimit

        class Env(CartPoleEnv):
            def reset(self, *, seed=None, options=None):
                EPISODES.append(seed)
                return super().reset(seed=seed, options=options)

        return TimeLimit(Env(), 200)


EPISODES: list = []


def test_a_stop_signal_is_honoured_between_validation_episodes(tmp_path):
    """SIGTERM sets the stop flag; a run checks it between tasks, and a validation phase is
    one task per episode: a stop asked for during 2 x 500 validation episodes ends the run
    after the episode in flight (the checkpoint of the last generation on disk), not
    after all of them."""
    import gymnasium as gym

    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.loop import RunOptions, RunStopped, run_evolution
    from synapto.parallel.farm import SerialFarm
    from synapto.store import RunData

    if "CountingCartPole-v0" not in gym.registry:
        gym.register("CountingCartPole-v0", entry_point=CountingCartPole.make)
    cfg = EvolveConfig(
        env="CountingCartPole-v0",
        agent="pruned-mlp",
        hidden=[4],
        population=4,
        episodes=1,
        generations=3,
        strategy="openai-es",
        validate_top=2,
        validate_episodes=500,
        test_episodes=0,
        seed=1,
    )
    EPISODES.clear()
    training = cfg.population * cfg.episodes
    stop_after = training + 3  # three validation episodes into generation 0's validation
    with pytest.raises(RunStopped) as stopped:
        run_evolution(
            cfg,
            tmp_path / "r.h5",
            SerialFarm(),
            log=lambda s: None,
            options=RunOptions(batch="off"),
            stop=lambda: len(EPISODES) >= stop_after,
        )
    assert stopped.value.generation == 0
    assert len(EPISODES) == stop_after  # the episode in flight ends, no other starts
    with RunData(tmp_path / "r.h5") as run:
        assert run.completed == 0


# -- compact run files and older ones ------------------------------------------------
def test_a_centre_strategy_stores_keys_not_populations(tmp_path):
    """O(genome) per generation: the centre, sigma and (P/2) noise keys; no /population.
    Every genome the reader rebuilds is the one the run evaluated (its fitness replays)."""
    import h5py

    from synapto.store import RunData

    out = tmp_path / "c.h5"
    res = run_cli("evolve", *LUNAR, "--strategy", "openai-es", "--out", out)
    assert res.returncode == 0, res.stderr
    with h5py.File(out, "r") as f:
        assert "population" not in f and f.attrs["samples"] == "mirrored"
        assert f["samples/keys"].shape[1:] == (4, 6) and f["samples/keys"].dtype == np.uint64
        assert f["samples/sigma"].shape[1:] == ()
    with RunData(out) as run:
        pop = run.population(1)
        assert pop.shape == (8, run.samples(1).centre.size)
        assert np.array_equal(run.population(1, 5), pop[5])
    res = run_cli("replay", out, "--sample", "6", "--sample-seed", "2")
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_format_3_run_file_still_reads_replays_and_resumes(tmp_path):
    """tests/data/v3_openai_es.h5: written by synapto before noise keys (format 3, with its
    population and checkpoint).  It reads, its stored evaluations replay exactly, and
    --resume extends it as a file of populations whose new generations are those of an
    uninterrupted run of the longer command."""
    from dataclasses import replace

    import h5py

    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.loop import run_evolution
    from synapto.parallel.farm import SerialFarm
    from synapto.store import RunData

    old = tmp_path / "v3.h5"
    shutil.copy(DATA / "v3_openai_es.h5", old)
    shutil.copy(DATA / "v3_openai_es.h5.ckpt", tmp_path / "v3.h5.ckpt")
    with h5py.File(old, "r") as f:
        assert f.attrs["format_version"] == 3 and "population" in f
    res = run_cli("replay", old, "--sample", "4")
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("evolve", "--resume", old, "--generations", "4")
    assert res.returncode == 0, res.stderr
    with RunData(old) as run:
        assert run.completed == 4 and not run.compact
        cfg = run.parse_config(EvolveConfig.from_json)
    fresh = tmp_path / "fresh.h5"
    run_evolution(replace(cfg, generations=4), fresh, SerialFarm(), log=lambda s: None)
    with RunData(old) as a, RunData(fresh) as b:
        assert b.compact
        assert a.population().tobytes() == b.population().tobytes()
        assert a.fitness().tobytes() == b.fitness().tobytes()
        assert a.champion().test_returns.tobytes() == b.champion().test_returns.tobytes()


# -- a rank that dies outright ------------------------------------------------------------
@pytest.mark.mpi
def test_a_worker_that_dies_is_named_with_its_host_and_the_resume_command(tmp_path):
    """A worker rank killed by a segfault ends the MPI job (MPI's semantics): with
    ``--restarts 0`` the command says in one line which rank died, where and of what,
    exits 139 (128 + SIGSEGV), and its resume command finishes the run as if nothing had
    happened (tests/test_restart.py: the job starts again on its own)."""
    import re

    args = [
        "evolve",
        "--env",
        "failing_env:DyingCartPole-v0",
        "--agent",
        "pruned-mlp",
        "--hidden",
        "4",
        "--population",
        "8",
        "--generations",
        "3",
        "--episodes",
        "2",
        "--batch",
        "off",
        "--workers",
        "2",
        "--strategy",
        "ga",
        "--validate-top",
        "0",
        "--validate-episodes",
        "16",
        "--select-episodes",
        "0",
        "--max-env-steps",
        "0",
    ]
    marker = tmp_path / "died"
    out = tmp_path / "run.h5"
    res = run_cli(*args, "--out", out, "--restarts", "0", extra_env={"SYNAPTO_TEST_DIE": marker})
    assert marker.exists(), res.stderr  # the case is what it claims to be
    rank = int(marker.read_text().split()[0])
    assert res.returncode == 139, (res.returncode, res.stderr)
    last = res.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"error: worker rank {rank} on \S+ died \(Fatal Python error: Segmentation fault\), "
        rf"which ended the MPI job \(exit 139\); .*--resume {re.escape(str(out))}",
        last,
    ), last
    res = run_cli(*last.split("python -m synapto ")[1].split(), extra_env={"SYNAPTO_TEST_DIE": marker})
    assert res.returncode == 0, res.stderr
    ref = tmp_path / "ref.h5"
    assert run_cli(*args, "--out", ref, extra_env={"SYNAPTO_TEST_DIE": marker}).returncode == 0
    assert_same_run(ref, out)


if __name__ == "__main__":
    {"busy": _busy_worker}[sys.argv[1]](sys.argv[2])


def test_every_farm_and_wrapper_has_the_farm_interface():
    """The farms and the batching wrapper take a map's arguments as the Farm protocol names
    them (callers pass them by position), and say how many workers they have and where tasks run."""
    import inspect

    from synapto.evolution.worker.batched import BatchingFarm
    from synapto.parallel.coordinator import MPIFarm
    from synapto.parallel.farm import SerialFarm
    from synapto.parallel.results import Farm

    want = inspect.signature(Farm.map)
    for farm in (SerialFarm, MPIFarm, BatchingFarm):
        assert inspect.signature(farm.map) == want, farm
        for name in ("setup", "close"):
            assert list(inspect.signature(getattr(farm, name)).parameters) == list(
                inspect.signature(getattr(Farm, name)).parameters
            ), (farm, name)
    wrapped = BatchingFarm(SerialFarm(), local=True)
    assert (wrapped.n_workers, wrapped.in_process) == (1, True)
