"""Cost of one checkpoint of the origin benchmark's population (138 hebbian-dag, hidden 8 8).

    .venv/bin/python scripts/bench_checkpoint.py

Prints the time of one checkpoint write (median of 20) and its size on disk.
"""

import statistics
import tempfile
import time
from pathlib import Path

from synapto.agents import build_agent
from synapto.common import seeding
from synapto.evolution.config import EvolveConfig
from synapto.evolution.strategies import make_strategy
from synapto.store import checkpoint_path, write_checkpoint

cfg = EvolveConfig(env="BipedalWalker-v3", agent="hebbian-dag", population=138, hidden=(8, 8), episodes=8, seed=13)
agent = build_agent(cfg)
strategy = make_strategy(cfg, agent, seeding.generator(13, seeding.Stream.EVOLVE))
strategy.start()
arrays, scalars = strategy.state()
scalars = {**scalars, "generation": 0, "env_steps": 0, "validation_steps": 0}
with tempfile.TemporaryDirectory() as d:
    run = Path(d) / "run.h5"
    times = []
    for _ in range(20):
        t = time.perf_counter()
        write_checkpoint(run, arrays, scalars, strategy.rng, cfg.to_json())
        times.append(time.perf_counter() - t)
    size = checkpoint_path(run).stat().st_size
print(
    f"checkpoint of {cfg.population} x {agent.n_params} parameters: median {statistics.median(times) * 1e3:.1f} ms, "
    f"{size / 1e6:.2f} MB on disk"
)
