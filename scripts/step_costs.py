"""CPU seconds per env step of the shipped configs, by env and training backend: the figures
of ``evolve --check``'s estimate (:data:`synapto.common.estimate.COSTS`).

    .venv/bin/python scripts/step_costs.py                 # every pair, about 3 min of CPU
    .venv/bin/python scripts/step_costs.py --only BipedalWalker-v3

Each pair runs its config in one process (``--workers 0``) twice, to a small and a larger
env-step budget, training episodes only (no validation, selection or test), and divides the
difference of the two processes' CPU time (user + system, children of this one) by the
difference of their env steps: start-up (imports, making envs) cancels out.  Early
generations are what it sees: short episodes of untrained agents, so resets weigh more
than over a whole run (Hopper and Walker2d run without their fall, see :data:`LONG`).
CPU time, not wall time, so a loaded machine skews it less.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

ROOT = Path(__file__).resolve().parents[1]

#: Hopper and Walker2d: episodes of 1,000 steps, as a run's later generations have (untrained
#: agents fall within tens of steps, and then resets are most of the cost)
LONG = ["--env-option", "terminate_when_unhealthy=false"]
#: (env, training backend[, agent]) -> (config, extra options, small budget, large budget)
PAIRS: dict[tuple[str, ...], tuple[str, list[str], int, int]] = {
    ("BipedalWalker-v3", "gymnasium"): ("bipedal_solve", [], 10_000, 50_000),
    ("BipedalWalker-v3", "envpool"): ("bipedal_fast", [], 10_000, 80_000),
    # the agent's share, checked once: a hebbian-dag 40-40 on envpool (the table keeps one figure per env)
    ("BipedalWalker-v3", "envpool", "hebbian-dag"): ("bipedal_hebbian", [], 10_000, 80_000),
    ("LunarLander-v3", "gymnasium"): ("lunarlander_hebbian", [], 20_000, 120_000),
    ("LunarLander-v3", "envpool"): ("lunarlander_hebbian", ["--env-option", "train_backend=envpool"], 20_000, 200_000),
    ("CartPole-v1", "gymnasium"): ("cartpole", [], 20_000, 400_000),
    ("HalfCheetah-v5", "gymnasium"): ("halfcheetah", [], 20_000, 150_000),
    ("Hopper-v5", "gymnasium"): ("hopper", LONG, 20_000, 150_000),
    ("Walker2d-v5", "gymnasium"): ("walker2d", LONG, 20_000, 150_000),
    ("Swimmer-v5", "gymnasium"): ("swimmer", [], 20_000, 150_000),
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(config: str, extra: list[str], budget: int, out: Path) -> tuple[float, int]:
    """``(CPU seconds, env steps)`` of one run of ``config`` to ``budget`` env steps."""
    cmd = [sys.executable, "-m", "synapto", "-q", "evolve", "--config", config, *extra, "--workers", "0"]
    cmd += ["--max-env-steps", str(budget), "--generations", "100000", "--validate-episodes", "0"]
    cmd += ["--select-episodes", "0", "--test-episodes", "0", "--seed", "1", "--out", str(out), "--force"]
    before = children_cpu()
    subprocess.run(cmd, check=True, cwd=ROOT)
    cpu = children_cpu() - before
    with h5py.File(out, "r") as f:
        n = int(f["completed"][0])
        steps = int(f["stats/env_steps"][n - 1])
    return cpu, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="one env id")
    args = parser.parse_args()
    print("| env | training backend | agent | config | us of CPU per env step |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for key, (config, extra, small, large) in PAIRS.items():
            if args.only and key[0] != args.only:
                continue
            cpu_a, steps_a = run(config, extra, small, Path(tmp) / "a.h5")
            cpu_b, steps_b = run(config, extra, large, Path(tmp) / "b.h5")
            per_step = (cpu_b - cpu_a) / max(steps_b - steps_a, 1)
            agent = key[2] if len(key) > 2 else "any"
            print(f"| {key[0]} | {key[1]} | {agent} | {config} | {per_step * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
