"""Score the champions of tuning runs on episodes of a stream of their own.

Settings are tuned on seeds no benchmark uses (1000-1004) and scored here, on 100
episodes of the TUNE stream (``synapto.seeding.tuning_seeds``): neither the training,
validation, selection nor test stream, so tuning never sees a test episode.  Run the
tuning runs with ``--test-episodes 0``.

    python scripts/tune_score.py runs/tune/*.h5 [--episodes 100]

Prints one line per run (seed, connections, env steps, tuning score) and, per group of
run files that differ only in the ``_s<seed>`` suffix, the scores side by side.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

import numpy as np

from synapto.agents import build_agent
from synapto.api import rollout
from synapto.evolution.config import EvolveConfig
from synapto.seeding import tuning_seeds
from synapto.store import RunData


def score(path: str, episodes: int) -> dict:
    with RunData(path, kind="evolve") as run:
        if not run.finished:  # its champion is not chosen yet: scoring it would score zeros
            print(f"tune_score: {path} is not finished (still running, or stopped: evolve --resume it)",
                  file=sys.stderr)
            raise SystemExit(2)
        cfg = EvolveConfig.from_json(run.config_json)
        champion = run.champion()
        steps = int(run.stats("env_steps")[-1]) + int(run.stats("validation_env_steps")[-1])
        selection = run.selection()
        if selection is not None:
            steps += int(selection.steps.sum())
        generations = run.completed
    agent = build_agent(cfg)
    result = rollout(agent, champion.genome, cfg.env, tuning_seeds(cfg.seed, episodes), obs_norm=champion.obs_norm)
    returns = np.asarray(result.returns, dtype=np.float64)
    return {"seed": cfg.seed, "score": float(returns.mean()), "std": float(returns.std()),
            "connections": int(np.count_nonzero(champion.genome)), "env_steps": steps, "generations": generations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--threshold", type=float, default=200.0, help="the score counted as solved (default 200)")
    args = parser.parse_args()
    groups = defaultdict(list)
    for path in args.runs:
        r = score(path, args.episodes)
        print(f"{path}: seed {r['seed']} score {r['score']:.1f} +/- {r['std']:.1f}, {r['connections']} connections, "
              f"{r['env_steps'] / 1e6:.2f} M env steps, {r['generations']} generations", flush=True)
        groups[re.sub(r"_s\d+(\.h5)$", r"\1", path)].append(r)
    for name, items in groups.items():
        items.sort(key=lambda r: r["seed"])
        scores = " ".join(f"{r['score']:.1f}" for r in items)
        conn = " ".join(str(r["connections"]) for r in items)
        print(f"{name}: scores {scores} (>= {args.threshold:g}: {sum(r['score'] >= args.threshold for r in items)}/{len(items)}); "
              f"connections {conn}")


if __name__ == "__main__":
    main()
