"""A tune study: search OpenAI-ES's lr and sigma on CartPole-v1, then score the best setting.

    python examples/tune_study.py          # 8 trials on 2 tuning seeds, about a minute on one core
    python examples/tune_study.py --tiny   # 2 trials on 1 seed, tiny runs (seconds)

``synapto tune`` (the ``tune`` extra, Optuna) runs a base config with sampled values on the
tuning seeds and scores each trial on the TUNE stream; the best trial's config is written
beside the study as a TOML file that ``evolve --config`` runs.  Its score is on tuning seeds:
the setting is quoted only after runs on seeds never used in tuning (the space's
``benchmark_seeds``), scored on the test stream, as the last step here does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import synapto

TINY = "--tiny" in sys.argv[1:]
OUT = Path("runs/examples/tune")

BASE = f"""# the base config: a small CartPole-v1 run
env = "CartPole-v1"
agent = "pruned-mlp"
hidden = [4]
strategy = "openai-es"
population = {8 if TINY else 16}
generations = 1000
max-env-steps = {2_000 if TINY else 20_000}
episodes = 1
validate-top = 1
validate-episodes = {2 if TINY else 4}
test-episodes = {5 if TINY else 100}

[strategy_options]
sigma = 0.1
lr = 0.03
prune = false
"""

SPACE = """# what the study samples; the seeds that score the result, which tuning refuses
benchmark_seeds = [1, 2, 3]

[params]
lr = { log_uniform = [0.001, 0.3] }
sigma = { uniform = [0.02, 0.3] }
"""


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "base.toml").write_text(BASE)
    (OUT / "space.toml").write_text(SPACE)
    study = OUT / "study.db"
    for stale in (study, OUT / "study.best.toml"):  # a new study each time (the same command continues one)
        stale.unlink(missing_ok=True)
    shutil.rmtree(OUT / "study.trials", ignore_errors=True)
    command = [sys.executable, "-m", "synapto", "tune", "--config", str(OUT / "base.toml")]
    command += ["--space", str(OUT / "space.toml"), "--study", str(study), "--milestones", "2"]
    command += (
        ["--seeds", "1000", "--trials", "2", "--score-episodes", "5"]
        if TINY
        else ["--seeds", "1000", "1001", "--trials", "8"]
    )
    subprocess.run(command, check=True)

    best = synapto.EvolveConfig.from_toml(OUT / "study.best.toml", seed=1)  # benchmark seed 1
    options = best.strategy_options
    summary = synapto.evolve(best, OUT / "best_s1.h5", force=True, log=lambda line: None)
    print(f"best: lr {options['lr']:.4g}, sigma {options['sigma']:.4g}; benchmark seed 1: test {summary.test_mean:.1f}")
    print(f"the study's table and plots: python -m synapto tune --report {study}")


if __name__ == "__main__":
    main()
