"""Score the champions of tuning runs on episodes of a stream of their own.

Settings are tuned on seeds no benchmark uses (1000-1004) and scored here, on 100
episodes of the TUNE stream (``synapto.common.seeding.tuning_seeds``): neither the training,
validation, selection nor test stream, so tuning never sees a test episode.  Run the
tuning runs with ``--test-episodes 0``.  The score is ``synapto.tune.score`` (the
objective of ``synapto tune``); this script prints it for runs tuned by hand.

    python scripts/tune_score.py runs/tune/*.h5 [--episodes 100]

Prints one line per run (seed, connections, env steps, tuning score) and, per group of
run files that differ only in the ``_s<seed>`` suffix, the scores side by side.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

from synapto.common.errors import UsageError
from synapto.tune.score import score_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--threshold", type=float, default=200.0, help="the score counted as solved (default 200)")
    args = parser.parse_args()
    groups = defaultdict(list)
    for path in args.runs:
        try:
            r = score_run(path, args.episodes)
        except UsageError as exc:
            print(f"tune_score: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        print(
            f"{path}: seed {r.seed} score {r.score:.1f} +/- {r.std:.1f}, {r.connections} connections, "
            f"{r.env_steps / 1e6:.2f} M env steps, {r.generations} generations",
            flush=True,
        )
        groups[re.sub(r"_s\d+(\.h5)$", r"\1", path)].append(r)
    for name, items in groups.items():
        items.sort(key=lambda r: r.seed)
        scores = " ".join(f"{r.score:.1f}" for r in items)
        conn = " ".join(str(r.connections) for r in items)
        solved = sum(r.score >= args.threshold for r in items)
        print(f"{name}: scores {scores} (>= {args.threshold:g}: {solved}/{len(items)}); connections {conn}")


if __name__ == "__main__":
    main()
