"""Batched evaluation over the workers: rows/s of one generation's training evaluation with
1 and 2 (or more) workers, side by side.

    .venv/bin/python scripts/bench_batched_workers.py                     # CartPole-v1, 512 x 4
    .venv/bin/python scripts/bench_batched_workers.py --population 64 --workers 1 2 4

Runs ``synapto evolve --workers N`` (batched, the default ``--batch auto``) for each worker
count in turn, ``--repeats`` times, and reads each generation's training evaluation time
from the run file (``/timing/eval_wall``); rows = population x episodes.  The first
generation of every run (start-up, caches) is left out.  Prints rows/s per worker count
(median over runs and generations) and the ratio to the first count.  Timings on a shared
machine vary: the counts alternate, so that a slow spell hits them alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--agent", default="pruned-mlp")
    ap.add_argument("--hidden", type=int, nargs="+", default=[8, 8])
    ap.add_argument("--population", type=int, default=512)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--generations", type=int, default=6)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = args.population * args.episodes
    rates: dict[int, list[float]] = {w: [] for w in args.workers}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "SYNAPTO_LAUNCHED"))}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for w in args.workers:
                out = Path(tmp) / f"w{w}_r{rep}.h5"
                cmd = [
                    sys.executable,
                    "-m",
                    "synapto",
                    "evolve",
                    "--env",
                    args.env,
                    "--agent",
                    args.agent,
                    "--hidden",
                    *map(str, args.hidden),
                    "--population",
                    str(args.population),
                    "--episodes",
                    str(args.episodes),
                    "--generations",
                    str(args.generations),
                    "--test-episodes",
                    "0",
                    "--validate-episodes",
                    "0",
                    "--seed",
                    str(rep),
                    "--workers",
                    str(w),
                    "--out",
                    str(out),
                ]
                subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
                with h5py.File(out, "r") as f:
                    rates[w] += [rows / t for t in f["timing/eval_wall"][1:]]
    base = statistics.median(rates[args.workers[0]])
    print(
        f"{args.env} {args.agent} {args.hidden}, population {args.population} x {args.episodes} episodes "
        f"= {rows} rows per generation, {args.repeats} runs x {args.generations - 1} generations per count"
    )
    for w in args.workers:
        med = statistics.median(rates[w])
        print(
            f"  {w} worker(s): {med:12,.0f} rows/s  (range {min(rates[w]):,.0f} - {max(rates[w]):,.0f})"
            f"  ratio {med / base:.2f}"
        )


if __name__ == "__main__":
    main()
