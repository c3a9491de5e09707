"""``bench envs``' BipedalWalker row: training env steps per CPU second, policy included,
on gymnasium's env one at a time against envpool in lockstep (``train_backend=envpool``).

Both paths evaluate the same pruned-mlp 24-40-40-4 genomes (as evolution has them after
a generation: 25 % pruned, the rest
times :data:`SCALE` ``(1 + 0.5 N(0, 1))``, so that some stand and most fall) on one training episode each,
through the code a run uses: :class:`synapto.evolution.worker.evaluate.Evaluator` (a fresh
gymnasium env per episode, one forward pass per step) and
:func:`synapto.evolution.worker.fast_box2d.evaluate_tasks` (one pool of ``rows`` envs, one
batched forward pass per step).  Rounds alternate between the two (side by side in
one run), each on fresh episode seeds.  The figure is env steps per second of the
process's CPU time (all its threads: envpool steps in a thread of its own), i.e. per
core busy: on a shared machine wall time measures the other processes too.
"""

from __future__ import annotations

import time

import numpy as np

from synapto.agents import build_agent
from synapto.bench.common import md_table
from synapto.common import seeding
from synapto.evolution.config import EvolveConfig
from synapto.evolution.worker.evaluate import Evaluator
from synapto.evolution.worker.fast_box2d import evaluate_tasks
from synapto.evolution.worker.spec import EvolveSpec
from synapto.evolution.worker.tasks import Episodes, EvalTask

ENV = "BipedalWalker-v3"
HIDDEN = (40, 40)
#: genomes' weights: init times SCALE times (1 + 0.5 N(0, 1)); init's all-ones net saturates
SCALE = 0.3


def genomes(n: int, seed: int = 0):
    agent = build_agent(EvolveConfig(env=ENV, agent="pruned-mlp", hidden=tuple(HIDDEN)))
    rng = np.random.default_rng(seed)
    g = np.stack([agent.init_genome(rng) for _ in range(n)])
    g = g * SCALE * (1.0 + 0.5 * rng.standard_normal(g.shape))
    g[rng.random(g.shape) < 0.25] = 0.0
    return agent, g


def bench_bipedal(rows: int = 64, seconds: float = 20.0) -> dict:
    """CPU-time steps/s of both paths, alternating rounds of ``rows`` one-episode
    evaluations (the same genomes and seeds for both) until the two have had about
    ``2 * seconds`` of CPU time together."""
    agent, gen = genomes(rows)
    serial = Evaluator(EvolveSpec(ENV, "pruned-mlp", HIDDEN, {}))
    cpu = {"gymnasium": 0.0, "envpool": 0.0}
    steps = {"gymnasium": 0, "envpool": 0}
    evaluate_tasks(agent, ENV, [EvalTask(gen[0], Episodes(np.array([0]), False, shaped=True))])  # imports envpool
    r = 0
    while cpu["gymnasium"] + cpu["envpool"] < 2 * seconds or r < 2:
        seeds = seeding.train_seeds(0, r, rows, 1, common=False)
        tasks = [EvalTask(gen[i], Episodes(seeds[i], False, shaped=True)) for i in range(rows)]
        t0 = time.process_time()
        res = [serial(t) for t in tasks]
        cpu["gymnasium"] += time.process_time() - t0
        steps["gymnasium"] += sum(int(x.steps.sum()) for x in res)
        t0 = time.process_time()
        res = evaluate_tasks(agent, ENV, tasks)
        cpu["envpool"] += time.process_time() - t0
        steps["envpool"] += sum(int(x.steps.sum()) for x in res)
        r += 1
    out = {
        k: {"steps": steps[k], "cpu_s": cpu[k], "per_core": steps[k] / cpu[k], "mean_episode": steps[k] / (r * rows)}
        for k in cpu
    }
    return {
        "env": ENV,
        "agent": "pruned-mlp 24-40-40-4",
        "rows": rows,
        "rounds": r,
        "paths": out,
        "ratio": out["envpool"]["per_core"] / out["gymnasium"]["per_core"],
    }


def table(data: dict) -> str:
    p = data["paths"]
    rows = [
        [
            "gymnasium, one env at a time",
            f"{p['gymnasium']['per_core']:,.0f}",
            f"{p['gymnasium']['mean_episode']:.0f}",
            "1.00",
        ],
        [
            f"envpool, {data['rows']} envs in lockstep",
            f"{p['envpool']['per_core']:,.0f}",
            f"{p['envpool']['mean_episode']:.0f}",
            f"{data['ratio']:.2f}",
        ],
    ]
    return md_table(
        ["BipedalWalker-v3, pruned-mlp 24-40-40-4", "steps/s per core (CPU time)", "mean episode", "ratio"], rows
    )


def available() -> bool:
    try:
        import envpool  # noqa: F401
    except ImportError:
        return False
    return True
