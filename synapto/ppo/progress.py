"""Spinning Up's plain-text files of a PPO run: ``progress.txt`` and ``config.json``.

For a run file ``runs/NAME.h5`` they go in the folder ``runs/NAME/`` (so Spinning Up's
plotter and ``pandas.read_table`` read them as they are).  Written by rank 0 beside the
run file (:mod:`synapto.store.ppo`), whose ``/stats`` hold the same columns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from synapto.ppo.config import PPOConfig
from synapto.store.ppo import INT_STATS, PROGRESS_COLUMNS


def log_dir(run_path: str | Path) -> Path:
    """The folder of progress.txt and config.json: the run file's path without ``.h5``."""
    return Path(run_path).with_suffix("")


def spinup_config(cfg: PPOConfig, ranks: int) -> dict:
    """config.json with Spinning Up's key names (its plotter reads ``exp_name``) plus ours."""
    return {
        "exp_name": cfg.exp_name,
        "env_name": cfg.env,
        "ac_kwargs": {"hidden_sizes": list(cfg.hid)},
        "seed": cfg.seed,
        "steps_per_epoch": cfg.steps_per_epoch,
        "epochs": cfg.epochs,
        "gamma": cfg.gamma,
        "clip_ratio": cfg.clip_ratio,
        "pi_lr": cfg.pi_lr,
        "vf_lr": cfg.vf_lr,
        "train_pi_iters": cfg.train_pi_iters,
        "train_v_iters": cfg.train_v_iters,
        "lam": cfg.lam,
        "max_ep_len": cfg.max_ep_len,
        "target_kl": cfg.target_kl,
        "save_freq": cfg.save_freq,
        "cpu": ranks,
        "synapto": {**asdict(cfg), "hid": list(cfg.hid), "ranks": ranks},
    }


def _cell(name: str, value) -> str:
    if name in INT_STATS:
        return str(int(value))
    return repr(float(value))


class ProgressWriter:
    """Spinning Up's ``progress.txt`` (tab-separated, header + one row per epoch) and ``config.json``."""

    def __init__(self, folder: Path, cfg: PPOConfig, ranks: int, rows: Sequence[dict] = ()):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(spinup_config(cfg, ranks), indent=4, sort_keys=True) + "\n")
        self.file = open(folder / "progress.txt", "w")  # noqa: SIM115 (one line per epoch until close())
        self.file.write("\t".join(PROGRESS_COLUMNS) + "\n")
        for row in rows:
            self.write(row)

    def write(self, row: dict) -> None:
        self.file.write("\t".join(_cell(name, row[name]) for name in PROGRESS_COLUMNS) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_progress(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a progress.txt (as strings)."""
    lines = Path(path).read_text().splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]
