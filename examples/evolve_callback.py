"""Run an evolution from Python and follow it with callbacks.

    python examples/evolve_callback.py          # CartPole-v1, about 20 seconds on one core
    python examples/evolve_callback.py --tiny   # two small generations, a few seconds

A callback is any function of a generation's report (``synapto.tracking.callbacks``): it is
called after each generation's rows are in the run file, with that row's statistics and
timings.  This one keeps a table of its own and prints one line per generation; beside it,
the built-in ``LiveLog`` writes the same statistics as a CSV that ``tail -f`` can follow.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import synapto
from synapto.tracking.callbacks import GenerationReport
from synapto.tracking.writers import LiveLog

TINY = "--tiny" in sys.argv[1:]
OUT = Path("runs/examples")


class BestSoFar:
    """Records each generation's best fitness and env steps, and writes them as a CSV at the end."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[tuple[int, float, int]] = []

    def __call__(self, report: GenerationReport) -> None:
        best = float(report.stats["best_fitness"])
        self.rows.append((report.generation, best, report.env_steps))
        print(f"  callback: generation {report.generation}, best {best:.1f}, {report.env_steps:,} env steps")

    def close(self) -> None:  # called once when the run ends, finished or not
        with open(self.path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["generation", "best_fitness", "env_steps"])
            writer.writerows(self.rows)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = synapto.EvolveConfig(
        env="CartPole-v1",
        agent="pruned-mlp",
        hidden=(4,),
        strategy="openai-es",
        strategy_options={"sigma": 0.1, "lr": 0.03, "prune": False},
        population=8 if TINY else 16,
        generations=2 if TINY else 40,
        episodes=1,
        validate_top=1,
        validate_episodes=2 if TINY else 4,
        test_episodes=5 if TINY else 100,
        seed=1,
    )
    best = BestSoFar(OUT / "callback_best.csv")
    (OUT / "callback_live.csv").unlink(missing_ok=True)  # a live log is appended to, never truncated
    summary = synapto.evolve(
        cfg,
        OUT / "callback.h5",
        force=True,
        log=lambda line: None,  # the progress lines: the callback prints its own
        callbacks=[best, LiveLog(OUT / "callback_live.csv")],
    )
    print(f"{summary.generations} generations, {summary.env_steps:,} env steps, champion test {summary.test_mean:.1f}")
    print(f"wrote {best.path} and {OUT / 'callback_live.csv'}")


if __name__ == "__main__":
    main()
