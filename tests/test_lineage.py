"""GA lineages (synapto/lineage.py): the GA's genomes as parents, segments,
pruned bits and noise keys, over the wire and in the run file, the same runs as before.

tests/data/ga_mlp.h5 (with its checkpoint) and ga_dag.h5 were written by main 8e2a0e2's
code, before lineages, with the commands of :data:`RUNS` (``--out`` and :data:`THEN` aside)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import assert_same_run, kill_group, run_cli, start_cli, wait_for_line

DATA = Path(__file__).parent / "data"
#: main 8e2a0e2's defaults that the fixtures' commands relied on (evolve's defaults are now the
#: default experiment's); the tests check that the stored configs are the same
THEN = [
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
    "--crn",
]
MLP = [
    "--env",
    "CartPole-v1",
    "--agent",
    "pruned-mlp",
    "--hidden",
    "8",
    "--population",
    "8",
    "--generations",
    "4",
    "--episodes",
    "1",
    "--test-episodes",
    "0",
    "--seed",
    "5",
    *THEN,
]
DAG = [
    "--env",
    "CartPole-v1",
    "--agent",
    "hebbian-dag",
    "--hidden",
    "4",
    "--population",
    "8",
    "--generations",
    "4",
    "--episodes",
    "1",
    "--test-episodes",
    "0",
    "--seed",
    "6",
    "--strategy-option",
    "prune_to=0.5",
    "--strategy-option",
    "prune_end=3",
    "--strategy-option",
    "prune_by=trace",
    *THEN,
]
#: the fixtures and the commands main 8e2a0e2 wrote them with
RUNS = {"ga_mlp.h5": MLP, "ga_dag.h5": DAG}


def _same_as_main(old: Path, new: Path) -> None:
    """Every dataset outside /timing equal; main's /population equal to the genomes the new
    file rebuilds from its lineages, bit for bit."""
    from synapto.store import RunData
    from synapto.store.compare import datasets

    with h5py.File(old, "r") as f, h5py.File(new, "r") as g:
        assert json.loads(f.attrs["config"]) == json.loads(g.attrs["config"])
    a, b = datasets(old), datasets(new)
    assert "population" in a and "population" not in b and "samples/keys" in b
    assert set(a) - {"population"} == {k for k in b if not k.startswith("samples/")}
    differ = [k for k in a if k != "population" and a[k].tobytes() != b[k].tobytes()]
    assert not differ, differ
    with RunData(new) as run:
        assert run.compact and run.population().tobytes() == a["population"].tobytes()
        assert run.population(3, 5).tobytes() == a["population"][3, 5].tobytes()


@pytest.mark.parametrize("fixture", sorted(RUNS))
def test_a_ga_run_equals_main_8e2a0e2s_and_stores_lineages(tmp_path, fixture):
    """pruned-mlp (the agent's pruning and Gaussian mutation; recombination of whole layers)
    and hebbian-dag under a trace-pruning target (+0.0 for pruned weights, elites cut too)."""
    new = tmp_path / "new.h5"
    proc = run_cli("evolve", *RUNS[fixture], "--out", new)
    assert proc.returncode == 0, proc.stderr
    _same_as_main(DATA / fixture, new)


def test_a_one_process_run_evaluates_the_genomes_it_holds(tmp_path, monkeypatch):
    """Without workers nothing is sent, so no genome is rebuilt from its lineage (which cost
    a one-process run of 4,096 Hebbian DAGs a third of its evaluation time): the run equals
    main 8e2a0e2's, and its file still stores the lineages."""
    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.loop import run_evolution
    from synapto.lineage import Lineage
    from synapto.parallel.farm import SerialFarm

    with h5py.File(DATA / "ga_mlp.h5", "r") as f:
        cfg = EvolveConfig.from_json(f.attrs["config"])
    out = tmp_path / "run.h5"
    with monkeypatch.context() as m:
        m.setattr(Lineage, "genome", lambda *a, **k: pytest.fail("a genome rebuilt from its lineage"))
        run_evolution(cfg, out, SerialFarm(), log=lambda line: None)
    _same_as_main(DATA / "ga_mlp.h5", out)


def test_a_checkpoint_holds_a_large_populations_lineage_in_few_chunks(tmp_path, monkeypatch):
    """A checkpoint's arrays are written once and read whole: their chunks hold as many rows
    as MAX_CHUNK allows (one per row made the checkpoint of a population of 4,096 take 0.2 s
    to build, every generation), and a row bigger than that is still cut."""
    from synapto.store import files, read_checkpoint, write_checkpoint

    rng = np.random.default_rng(0)
    arrays = {
        "lineage_keys": rng.integers(0, 2**63, size=(4096, 6), dtype=np.uint64),
        "lineage_origin": rng.integers(-1, 9, size=(4096, 3)),
        "best_genome": rng.normal(size=68),
    }
    write_checkpoint(tmp_path / "run.h5", arrays, {"generation": 2}, rng, "{}")
    with h5py.File(tmp_path / "run.h5.ckpt", "r") as f:
        assert {name: f[name].id.get_num_chunks() for name in arrays} == dict.fromkeys(arrays, 1)
    back = read_checkpoint(tmp_path / "run.h5", run_id="")
    assert back is not None and all(back.arrays[k].tobytes() == v.tobytes() for k, v in arrays.items())
    monkeypatch.setattr(files, "MAX_CHUNK", 1024)  # 128 rows of 8 bytes, or a row of 1,600 bytes cut in 2
    write_checkpoint(
        tmp_path / "small.h5", {"a": np.zeros((300, 1)), "b": np.ones((3, 200))}, {"generation": 2}, rng, "{}"
    )
    with h5py.File(tmp_path / "small.h5.ckpt", "r") as f:
        assert (f["a"].chunks, f["a"].id.get_num_chunks()) == ((128, 1), 3)
        assert (f["b"].chunks, f["b"].id.get_num_chunks()) == ((1, 100), 6)


@pytest.mark.slow
def test_main_8e2a0e2s_ga_file_reads_replays_and_resumes_as_populations(tmp_path):
    """A GA file of populations (and its checkpoint, without lineages) still reads, its
    evaluations replay exactly, and --resume extends it as a file of populations equal to
    an uninterrupted run of the longer command."""
    old = tmp_path / "old.h5"
    shutil.copy(DATA / "ga_mlp.h5", old)
    shutil.copy(DATA / "ga_mlp.h5.ckpt", tmp_path / "old.h5.ckpt")
    res = run_cli("replay", old, "--sample", "3")
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("evolve", "--resume", old, "--generations", "6")
    assert res.returncode == 0, res.stderr
    fresh = tmp_path / "fresh.h5"
    res = run_cli("evolve", *MLP, "--generations", "6", "--out", fresh)
    assert res.returncode == 0, res.stderr
    from synapto.store import RunData

    with RunData(old) as a, RunData(fresh) as b:
        assert not a.compact and b.compact and a.completed == 6
        assert a.population().tobytes() == b.population().tobytes()
        assert a.fitness().tobytes() == b.fitness().tobytes()


def test_the_wire_and_the_file_rebuild_every_genome_the_ga_asked_for():
    """Over several generations and with every way of varying a child (mutation with and
    without the agent's pruning, pure pruning, a magnitude budget), each genome rebuilt from
    the strategy's lineage as a worker does, and from the file's form (references, no
    parents), equals the genome the strategy asks to evaluate, bit for bit."""
    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.strategies.ga import GA
    from synapto.lineage import Lineage, rebuild

    cfg = EvolveConfig(env="CartPole-v1", agent="hebbian-dag", hidden=(4,), population=9)
    agent = build_agent(cfg)
    for options in (
        {},
        {"prune": False},
        {"mutation_std": 0.0},
        {"prune_to": 0.4, "prune_end": 3, "prune_by": "magnitude"},
    ):
        ga = GA(agent, 9, options, np.random.default_rng(4))
        ga.start()
        stored, asked = {}, {}
        for g in range(5):
            lineage, genomes = ga.samples(), ga.ask()
            assert lineage is not None
            for i in range(9):
                assert lineage.genome(i).tobytes() == genomes[i].tobytes(), (options, g, i)
            stored[g] = Lineage.from_arrays(lineage.bounds, lineage.arrays())
            asked.update({(g, i): genomes[i] for i in range(9)})
            _tell(ga, agent, g)
        built = rebuild(stored.get, list(asked), lambda: agent, "test")
        assert all(built[w].tobytes() == asked[w].tobytes() for w in asked), options


def test_alive_indices_are_flatnonzeros_short_and_long():
    """perturb's surviving weights, counted as np.flatnonzero counts them on genomes below and
    above the length where a comparison comes first: NaN and infinities survive, -0.0 does not."""
    from synapto.lineage import alive_indices

    rng = np.random.default_rng(3)
    for n in (1, 7, 1024, 1025, 70_000):
        genome = rng.normal(size=n)
        genome[rng.random(n) < 0.3] = 0.0
        genome[rng.random(n) < 0.1] = -0.0
        genome[rng.random(n) < 0.01] = np.nan
        genome[rng.random(n) < 0.01] = -np.inf
        assert np.array_equal(alive_indices(genome), np.flatnonzero(genome)), n


def _tell(ga, agent, g):
    from synapto.evolution.strategies.base import Candidates, Feedback

    genomes = ga.ask()
    fitness = np.random.default_rng(g).normal(size=len(genomes))
    stats = np.random.default_rng(g + 10).random(genomes.shape)
    none = Candidates(np.zeros(0, np.int64), np.zeros((0, agent.n_params)))
    ga.tell(Feedback(g, fitness, stats, np.array([agent.connections(x) for x in genomes]), none, np.zeros(0)))


def test_a_restored_ga_goes_on_with_the_same_lineages():
    """state() / restore() mid-run (the checkpoint, which keeps the lineage and the hall of
    fame's rows, not the population): the next generations' lineages, references to
    older hall-of-fame members included, and genomes are those of the run that went on."""
    import copy

    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig
    from synapto.evolution.strategies.ga import GA

    cfg = EvolveConfig(env="CartPole-v1", agent="pruned-mlp", hidden=(4,), population=20)
    agent = build_agent(cfg)
    ga = GA(agent, 20, {}, np.random.default_rng(7))
    ga.start()
    for g in range(3):
        _tell(ga, agent, g)
    arrays, scalars = ga.state()
    assert "genomes" not in arrays and "lineage_parents" in arrays
    back = GA(agent, 20, {}, copy.deepcopy(ga.rng))
    back.restore(arrays, {**scalars, "generation": 3})
    older = False
    for g in range(3, 8):
        assert back.ask().tobytes() == ga.ask().tobytes()
        a, b = ga.samples().arrays(), back.samples().arrays()
        assert all(a[k].tobytes() == b[k].tobytes() for k in a), g
        older |= bool((a["refs"][:, 0][a["refs"][:, 0] >= 0] < g - 1).any())
        _tell(ga, agent, g)
        _tell(back, agent, g)
    assert older  # some child had a parent from before the previous generation


@pytest.mark.mpi
@pytest.mark.slow
def test_a_ga_run_is_the_same_on_1_and_3_ranks_and_through_kill_9_and_resume(tmp_path):
    """The serial run equals main's fixture; under mpiexec with 1 and 3 ranks (lineages over
    the wire) the run files are the same; a run killed with SIGKILL at the start of
    generation 2 and resumed on 3 ranks ends the same too."""
    serial = tmp_path / "serial.h5"
    assert run_cli("evolve", *MLP, "--out", serial).returncode == 0
    _same_as_main(DATA / "ga_mlp.h5", serial)
    for ranks in (1, 3):
        out = tmp_path / f"r{ranks}.h5"
        proc = run_cli("evolve", *MLP, "--out", out, ranks=ranks)
        assert proc.returncode == 0, proc.stderr
        assert_same_run(serial, out)
    out = tmp_path / "killed.h5"
    proc = start_cli("evolve", *MLP, "--out", out, ranks=3, extra_env={"SYNAPTO_FAULT": "generation:2"})
    wait_for_line(proc, "FAULT-POINT")
    kill_group(proc)
    proc.wait(timeout=30)
    with h5py.File(out, "r", swmr=True) as f:
        assert int(f["completed"][0]) == 2
    proc = run_cli("evolve", "--resume", out, ranks=3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_run(serial, out)


@pytest.mark.slow
def test_a_damaged_lineage_is_refused_in_one_line(tmp_path):
    """A parent reference to a row the file does not hold (here: a generation after the
    child's) makes RunData.population and replay refuse the file in one line, exit 2."""
    from synapto.common.errors import RunFileError
    from synapto.store import RunData

    out = tmp_path / "run.h5"
    assert run_cli("evolve", *MLP, "--out", out).returncode == 0
    with h5py.File(out, "r+") as f:
        f["samples/refs"][2, :, 0] = 3  # generation 2's parents said to be in generation 3
    with RunData(out) as run:
        run.population(1)  # the generations before are whole
        with pytest.raises(RunFileError, match="damaged lineage"):
            run.population(3, 0)
    res = run_cli("replay", out, "--generation", "3", "--individual", "0")
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "generation 2" in err[0], res.stderr


@pytest.fixture(scope="module")
def ga_file(tmp_path_factory):
    """A small GA run stored as lineages: 12 individuals, 5 generations, 24 weights in 2 segments."""
    import synapto

    path = tmp_path_factory.mktemp("lineage") / "ga.h5"
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(4,),
        population=12,
        generations=5,
        episodes=1,
        validate_episodes=0,
        test_episodes=0,
        strategy="ga",
        seed=5,
    )
    synapto.evolve(cfg, path, log=lambda m: None)
    with h5py.File(path, "r") as f:
        assert f.attrs["samples"] == "lineage" and json.loads(f.attrs["lineage_bounds"]) == [0, 16, 24]
    return path


def _set_row(f, name, generation, change):
    row = f[name][generation]
    change(row)
    f[name][generation] = row


GEN, ROW = 4, 5  # the damaged child: generation 4, individual 5
DAMAGE = {
    "origin -1 in a later segment": lambda f: _set_row(f, "samples/origin", GEN, lambda a: a.__setitem__((ROW, 1), -1)),
    "origin -1 in the first segment": lambda f: _set_row(
        f, "samples/origin", GEN, lambda a: a.__setitem__((ROW, 0), -1)
    ),
    "origin -7": lambda f: _set_row(f, "samples/origin", GEN, lambda a: a.__setitem__(ROW, -7)),
    "a parent in generation 0": lambda f: _set_row(f, "samples/origin", 0, lambda a: a.__setitem__(ROW, 0)),
    "origin deleted": lambda f: f.__delitem__("samples/origin"),
    "refs deleted": lambda f: f.__delitem__("samples/refs"),
    "std deleted": lambda f: f.__delitem__("samples/std"),
    "std nan": lambda f: f["samples/std"].__setitem__(GEN, np.nan),
    "std -1": lambda f: f["samples/std"].__setitem__(GEN, -1.0),
    "bounds not JSON": lambda f: f.attrs.__setitem__("lineage_bounds", "[0, 16,"),
    "bounds missing": lambda f: f.attrs.__delitem__("lineage_bounds"),
    "bounds past the genome": lambda f: f.attrs.__setitem__("lineage_bounds", "[0, 16, 40]"),
    "bounds short of the genome": lambda f: f.attrs.__setitem__("lineage_bounds", "[0, 16, 20]"),
    "bounds unsorted": lambda f: f.attrs.__setitem__("lineage_bounds", "[0, 20, 16, 24]"),
    "samples attribute renamed": lambda f: (
        f.attrs.__setitem__("samplez", f.attrs["samples"]),
        f.attrs.__delitem__("samples"),
    ),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_an_impossible_lineage_is_refused_as_corrupted(ga_file, tmp_path, capsys, kind):
    """Damage that no GA could have written (a fresh draw after generation 0, a negative
    std, bounds that do not cut the genome, a missing dataset or attribute) is refused in
    one line by every reader, never rebuilt as another network or a traceback."""
    import synapto
    from synapto.cli import main
    from synapto.common.errors import RunFileError
    from synapto.store import RunData

    out = tmp_path / "damaged.h5"
    shutil.copyfile(ga_file, out)
    with h5py.File(out, "r+") as f:
        DAMAGE[kind](f)
    says = rf"^'{out}' is corrupted: .*"
    with RunData(out) as run, pytest.raises(RunFileError, match=says):
        run.population(GEN, ROW)
    with pytest.raises(RunFileError, match=says):
        synapto.load_policy(out, GEN, ROW)
    commands = [["replay", out, "--generation", GEN, "--individual", ROW]]
    if importlib.util.find_spec("matplotlib") is not None:  # draw needs the plot extra
        commands.append(["draw", out, "--generation", GEN, "--individual", ROW, "--out", tmp_path / "d.png"])
    for command in commands:
        with pytest.raises(SystemExit) as exc:
            main([str(a) for a in command])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith(f"error: '{out}' is corrupted: "), err
    assert not (tmp_path / "d.png").exists()


def test_the_undamaged_lineage_reads(ga_file):
    """The control: the same reads of the file as it was written."""
    import synapto
    from synapto.store import RunData

    with RunData(ga_file) as run:
        genome = run.population(GEN, ROW)
    assert genome.shape == (24,) and synapto.load_policy(ga_file, GEN, ROW) is not None


def test_perturb_in_place_writes_the_bits_of_a_fresh_perturbation():
    """perturb into the genome itself (the GA's children) or into a copy: the surviving weights
    get ``w + std * noise`` as numpy adds them, pruned ones (0.0 and -0.0) keep their bits."""
    from synapto.lineage import perturb

    rng = np.random.default_rng(5)
    genome = rng.normal(size=3000)
    genome[rng.random(3000) < 0.3] = 0.0
    genome[rng.random(3000) < 0.1] = -0.0
    alive = np.flatnonzero(genome)
    expected = genome.copy()
    expected[alive] = genome[alive] + 0.5 * np.random.default_rng(9).standard_normal(alive.size)
    fresh = perturb(genome, 0.5, np.random.default_rng(9))
    row = genome.copy()
    assert perturb(row, 0.5, np.random.default_rng(9), in_place=True) is row
    assert fresh.tobytes() == row.tobytes() == expected.tobytes()
    assert fresh is not genome and not np.array_equal(fresh, genome)
