"""What more processes buy PPO: epochs of shipped PPO configs at 1 and 2 processes, side by side.

    python scripts/bench_ppo_processes.py [--epochs ppo_bipedal=1 ppo_lunarlander=4] [--procs 1 2]
        [--updates gathered allreduce]

Each config runs ``--epochs`` epochs (no final test; ``CONFIG=EPOCHS:STEPS`` shortens its
epochs to STEPS env steps, which scales the rollout and the minibatch update alike) at each process count, the counts
alternating from config to config; the table gives, from the run file's ``/timing``
(rank 0, mean over the epochs), the seconds
per epoch, its rollout (which the processes split) and the rest (values, GAE, the
update with its collectives: PPO's serial share), and the epoch rate against 1 process.
Several processes run each ``--updates`` way of the minibatch update (``--minibatch-update``).
Timings from a shared machine are indicative: the load is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def one(config: str, epochs: int, steps: str, procs: int, update: str, tmp: Path) -> dict:
    from synapto.store import PPORun

    out = tmp / f"{config}_{procs}_{update}.h5"
    cmd = [
        sys.executable,
        "-m",
        "synapto",
        "ppo",
        "--config",
        config,
        "--epochs",
        str(epochs),
        "--test-episodes",
        "0",
        "--cpu",
        str(procs),
        "--out",
        str(out),
        "--force",
        "--minibatch-update",
        update,
        *(["--steps-per-epoch", steps] if steps else []),
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with PPORun(out) as run:
        epoch, rollout = run.timing("epoch"), run.timing("rollout")
    return {
        "config": config,
        "procs": procs,
        "update": update if procs > 1 else "-",
        "epoch": float(np.mean(epoch)),
        "rollout": float(np.mean(rollout)),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--epochs", nargs="+", default=["ppo_bipedal=1", "ppo_lunarlander=4"], help="CONFIG=EPOCHS[:STEPS_PER_EPOCH]"
    )
    ap.add_argument("--procs", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--updates", nargs="+", default=["gathered"], choices=["gathered", "allreduce"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, item in enumerate(args.epochs):
            config, _, rest = item.partition("=")
            epochs, _, steps = rest.partition(":")
            runs = [(p, u) for p in args.procs for u in (args.updates if p > 1 else args.updates[:1])]
            for p, u in runs if i % 2 == 0 else runs[::-1]:
                rows.append(one(config, int(epochs), steps, p, u, Path(tmp)))
    print(
        "| config | processes | update | s / epoch | rollout | rest (serial) | epoch rate vs 1 process | load after |"
    )
    print("|:---|---:|:---|---:|---:|---:|---:|---:|")
    for r in rows:
        base = next(b for b in rows if b["config"] == r["config"] and b["procs"] == min(args.procs))
        print(
            f"| {r['config']} | {r['procs']} | {r['update']} | {r['epoch']:.2f} | {r['rollout']:.2f} | "
            f"{r['epoch'] - r['rollout']:.2f} | {base['epoch'] / r['epoch']:.2f}x | {r['load']:.1f} |"
        )


if __name__ == "__main__":
    main()
