"""``synapto bench envs``: CartPole-v1 steps/s against the number of environments.

Backends (rows of the table), each stepping ``n`` environments for a fixed budget
of env steps, with random actions and with a synapto agent (pruned-mlp, hidden 8 8)
choosing the actions:

* ``sync``   -- gymnasium ``SyncVectorEnv`` (``n`` envs stepped one after another);
* ``async``  -- gymnasium ``AsyncVectorEnv``, one subprocess per env (up to
  ``--max-async`` envs: each is a process);
* ``vector`` -- gymnasium's numpy-batched CartPole (``vectorization_mode="vector_entry_point"``);
* ``bipedal`` -- not CartPole: BipedalWalker-v3's training steps per CPU second with a
  pruned-mlp 24-40-40-4 policy, gymnasium one env at a time against envpool in lockstep
  (:mod:`synapto.bench.box2d`; needs the envpool extra);
* ``mpi``    -- synapto's MPI workers: ``n`` one-episode evaluations of a population
  of ``n`` individuals farmed to ``--workers`` ranks, one env at a time
  (``evolve --batch off``'s path); with ``--batched`` chunks the same tasks through
  the batched evaluator instead (the agent column only).

Figures are env steps per second of wall time and, in ``per_core``, per second of
the busy cores (``min(processes, cores)``).  Autoreset steps are counted as steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from synapto.bench.common import cpu_count, md_table, pyplot
from synapto.common import seeding
from synapto.common.errors import UsageError
from synapto.common.folders import check_out_dir
from synapto.envs import _gym, space_info

ENV = "CartPole-v1"
DEFAULT_NS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
#: wall-time cap of one measurement (seconds): a point stops at its step budget or here
SECONDS = 1.5


def _policy(n: int, seed: int = 0):
    """A pruned-mlp agent and ``n`` genomes as evolution has them after its first
    generation: 25 % pruned, surviving weights ``1 + 0.5 N(0, 1)`` (``--mutation-std``'s
    perturbation).  Generation-0 genomes (all weights 1.0) tie exactly between the two
    actions on a few % of the rows, which the batched policy hands to the one-row path."""
    from synapto.agents import build_agent
    from synapto.evolution.config import EvolveConfig

    agent = build_agent(EvolveConfig(env=ENV, agent="pruned-mlp", hidden=(8, 8)))
    rng = np.random.default_rng(seed)
    genomes = np.stack([agent.init_genome(rng) for _ in range(n)])
    genomes = genomes * (1.0 + 0.5 * rng.standard_normal(genomes.shape))
    return agent, genomes


def bench_gym(kind: str, n: int, steps: int, with_agent: bool) -> float:
    """Steps/s of ``n`` envs of ``kind`` (sync, async, vector) for about ``steps`` steps."""
    gym = _gym()
    mode = {"sync": "sync", "async": "async", "vector": "vector_entry_point"}[kind]
    kw = {"vector_kwargs": {"context": "fork"}} if kind == "async" else {}
    env = gym.make_vec(ENV, num_envs=n, vectorization_mode=mode, **kw)
    try:
        obs, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        policy = None
        if with_agent:
            agent, genomes = _policy(n)
            policy = agent.batch_policy(genomes, want_stats=False)
        iters = max(2, steps // n)
        t0 = time.perf_counter()
        done = 0
        while done < iters and (done < 2 or time.perf_counter() - t0 < SECONDS):
            action = policy.act(obs) if policy is not None else rng.integers(0, 2, n)
            obs, *_ = env.step(action)
            done += 1
        return done * n / (time.perf_counter() - t0)
    finally:
        env.close()


def bench_mpi(n: int, workers: int, with_agent: bool, batched: bool, steps: int) -> float:
    """Steps/s of farming ``n`` one-episode evaluations to ``workers`` MPI ranks (a subprocess)."""
    from synapto.parallel.launch import find_mpiexec

    cmd = [find_mpiexec(), "-n", str(workers + 1), sys.executable, "-m", "synapto.bench.envs", str(n)]
    cmd += [str(int(with_agent)), str(int(batched)), str(steps)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "HYDRA_"))}
    env.pop("SYNAPTO_LAUNCHED", None)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"mpi bench failed: {res.stderr[-2000:]}")
    return float(res.stdout.strip().splitlines()[-1])


def _mpi_main(n: int, with_agent: bool, batched: bool, steps: int) -> None:
    """Under mpiexec: rank 0 farms rounds of ``n`` one-episode tasks until ``steps`` steps."""
    from synapto.evolution.worker.batched import batching_farm
    from synapto.evolution.worker.spec import EvolveSpec
    from synapto.evolution.worker.tasks import Episodes, EvalTask
    from synapto.parallel.farm import make_farm

    farm, coordinator = make_farm()
    if not coordinator:
        return
    agent, genomes = _policy(n)
    if not with_agent:  # a random policy: the network's output ignored, actions uniformly random
        spec = EvolveSpec(ENV, "synapto.bench.envs:RandomAgent", (1,), {})
        agent = RandomAgent.for_env()
        genomes = np.zeros((n, agent.n_params))
    else:
        spec = EvolveSpec(ENV, "pruned-mlp", (8, 8), {})
    farm = batching_farm(farm, spec, agent, "auto" if batched else "off")
    try:
        done, t0, r = 0, time.perf_counter(), 0
        while (done < steps and time.perf_counter() - t0 < SECONDS) or r == 0:
            seeds = seeding.train_seeds(0, r, n, 1, common=False)
            res = farm.map([EvalTask(genomes[i], Episodes(seeds[i], False)) for i in range(n)])
            done += int(sum(x.steps.sum() for x in res))
            r += 1
        print(done / (time.perf_counter() - t0), flush=True)
    finally:
        farm.close()


try:
    from synapto.agents.base import Agent, Policy

    class _RandomPolicy(Policy):
        def __init__(self, genome):
            self.rng = np.random.default_rng(int(abs(genome).sum()))

        def reset(self):
            pass

        def act(self, obs):
            return int(self.rng.integers(0, 2))

    class RandomAgent(Agent):
        """Uniformly random CartPole actions (the farm's cost without a network)."""

        name = "random"

        @classmethod
        def for_env(cls):
            return cls(space_info(ENV), (1,))

        @property
        def n_params(self):
            return 1

        def init_genome(self, rng):
            return np.zeros(1)

        def policy(self, genome):
            return _RandomPolicy(genome)

        def groups(self):
            return [[slice(0, 1)]]

        def mutate(self, genome, stats, rate, rng):
            return genome
except ImportError:  # pragma: no cover
    pass


def _result(backend: str, agent: bool, n: int, sps: float, busy: int) -> dict:
    return dict(backend=backend, agent=agent, envs=n, steps_per_s=sps, per_core=sps / busy, cores=busy)


def run_envs(ns, steps: int, workers: int, max_async: int, max_serial: int, backends) -> dict:
    cores = cpu_count()
    results = []
    for backend in backends:
        for with_agent in (False, True):
            for n in ns:
                if backend == "async" and n > max_async:
                    continue
                if backend in ("sync", "mpi") and n > max_serial:
                    continue
                if backend == "mpi":
                    sps = bench_mpi(n, workers, with_agent, False, steps)
                    procs = workers + 1
                else:
                    sps = bench_gym(backend, n, steps, with_agent)
                    procs = n + 1 if backend == "async" else 1
                results.append(_result(backend, with_agent, n, sps, min(procs, cores)))
                print(
                    f"  {backend:>6} {'agent' if with_agent else 'random':>6} n={n:<6} {sps:>14,.0f} steps/s",
                    flush=True,
                )
    if "mpi" in backends:  # the batched evaluator on the same farm, agent in the loop
        for n in ns:
            if n > max_serial * 16:
                continue
            sps = bench_mpi(n, workers, True, True, steps)
            results.append(_result("mpi-batched", True, n, sps, min(workers + 1, cores)))
            print(f"  mpi-batched  agent n={n:<6} {sps:>14,.0f} steps/s", flush=True)
    return {"env": ENV, "steps": steps, "workers": workers, "cores": cores, "results": results}


def table(data: dict) -> str:
    ns = sorted({r["envs"] for r in data["results"]})
    rows = []
    for b, a in dict.fromkeys((r["backend"], r["agent"]) for r in data["results"]):
        by_n = {r["envs"]: r["steps_per_s"] for r in data["results"] if (r["backend"], r["agent"]) == (b, a)}
        rows.append([b, "agent" if a else "random", *(f"{by_n[n]:,.0f}" if n in by_n else "–" for n in ns)])
    return md_table(["backend", "actions", *(f"n={n}" for n in ns)], rows, align="ll" + "r" * len(ns))


def plot(data: dict, path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for b, a in dict.fromkeys((r["backend"], r["agent"]) for r in data["results"]):
        pts = sorted((r["envs"], r["steps_per_s"]) for r in data["results"] if (r["backend"], r["agent"]) == (b, a))
        ax.plot(*zip(*pts), marker="o", linestyle="-" if a else "--", label=f"{b} ({'agent' if a else 'random'})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("environments")
    ax.set_ylabel("env steps / s")
    ax.set_title(f"{data['env']}: steps/s against environments ({data['cores']} cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def register(bench_app: typer.Typer) -> None:
    @bench_app.command("envs")
    def bench_envs(
        max_envs: Annotated[int, typer.Option(help="Largest number of environments (powers of 4 from 1).")] = 65536,
        steps: Annotated[int, typer.Option(help="Env steps per measurement (at least 2 steps of all envs).")] = 200000,
        workers: Annotated[int, typer.Option(help="MPI worker ranks of the mpi backend.")] = 2,
        max_async: Annotated[int, typer.Option(help="Largest AsyncVectorEnv (one process per env).")] = 16,
        max_serial: Annotated[
            int, typer.Option(help="Largest SyncVectorEnv / MPI farm (envs stepped one by one).")
        ] = 1024,
        backend: Annotated[
            list[str] | None, typer.Option(help="Backends to run: sync async vector mpi.", show_default="all")
        ] = None,
        out_dir: Annotated[Path, typer.Option(help="Where envs.md, envs.json and envs.png go.")] = Path("bench"),
        bipedal_rows: Annotated[int, typer.Option(help="bipedal: envs stepped in lockstep on envpool.")] = 64,
        bipedal_seconds: Annotated[
            float, typer.Option(help="bipedal: CPU seconds per path (rounds alternate between the two).")
        ] = 20.0,
    ):
        """CartPole-v1 steps/s against the number of environments, per backend; and BipedalWalker-v3 training
        steps per CPU second, gymnasium one env at a time against envpool in lockstep (backend bipedal)."""
        from synapto.bench import box2d

        backends = list(backend) if backend else ["sync", "async", "vector", "mpi", "bipedal"]
        unknown = sorted(set(backends) - {"sync", "async", "vector", "mpi", "bipedal"})
        if unknown:
            raise UsageError(f"--backend: unknown {', '.join(unknown)} (known: sync async vector mpi bipedal)")
        bipedal = "bipedal" in backends
        if bipedal and not box2d.available():
            if backend:
                raise UsageError("--backend bipedal needs the envpool extra: pip install -e .[envpool]")
            print("bipedal row skipped: the envpool extra is not installed")
            bipedal = False
        backends = [b for b in backends if b != "bipedal"]
        if max_envs < 1 or steps < 1 or workers < 1 or bipedal_rows < 1 or not bipedal_seconds > 0:
            raise UsageError("--max-envs, --steps, --workers and --bipedal-rows must be >= 1, --bipedal-seconds > 0")

        check_out_dir(out_dir)  # before minutes of measuring
        ns = [n for n in DEFAULT_NS if n <= max_envs]
        data = run_envs(ns, steps, workers, max_async, max_serial, backends)
        md = table(data) if data["results"] else ""
        if bipedal:
            data["bipedal"] = box2d.bench_bipedal(bipedal_rows, bipedal_seconds)
            md += f"\n\n{box2d.table(data['bipedal'])}" if md else box2d.table(data["bipedal"])
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "envs.json").write_text(json.dumps(data, indent=2))
        (out_dir / "envs.md").write_text(f"# bench envs: {ENV} env steps/s ({data['cores']} cores)\n\n{md}\n")
        png = plot(data, out_dir / "envs.png") if data["results"] else False
        print(md)
        print(f"-> {out_dir / 'envs.md'}, {out_dir / 'envs.json'}" + (f", {out_dir / 'envs.png'}" if png else ""))


if __name__ == "__main__":
    _mpi_main(int(sys.argv[1]), bool(int(sys.argv[2])), bool(int(sys.argv[3])), int(sys.argv[4]))
