"""``python -m synapto.bench.race.sb3_train SPEC.json``: one Stable-Baselines3 run of a
race (:mod:`synapto.bench.race.sb3` writes the spec).

It trains the spec's algorithm with its settings on ``threads`` torch threads, seeded
from the run seed's own stream (``Stream.BASELINE``), and keeps its actor
(``actor_<env steps>.pt``) every ``save_every_steps`` env steps, every
``save_every_s`` seconds, and at the end.  Its clock starts with the training (the
model built) and stops it at ``max_seconds``.  ``progress.json`` beside the spec lists
the kept actors with the env steps and the seconds of that clock at each, and whether
the run finished its ``n_timesteps`` or stopped at the cap.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import uuid
from pathlib import Path

from synapto.bench.race.sb3 import ALGOS
from synapto.common.seeding import Stream, seed_sequence
from synapto.envs import make_env


def learning_rate(value):
    """A number, or ``"lin_X"``: X falling linearly to 0 over the run (SB3 passes the
    progress remaining, 1 to 0)."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda remaining: remaining * start
    return float(value)


def build(spec: dict):
    package, name = ALGOS[spec["algo"]]
    cls = getattr(importlib.import_module(package), name)
    kwargs = {k: v for k, v in spec["settings"].items() if k != "n_timesteps"}
    if "learning_rate" in kwargs:
        kwargs["learning_rate"] = learning_rate(kwargs["learning_rate"])
    seed = int(seed_sequence(spec["seed"], Stream.BASELINE).generate_state(1)[0])
    return cls("MlpPolicy", make_env(spec["env"]), seed=seed, device="cpu", verbose=0, **kwargs)


class Keeper:
    """Keeps the actor on schedule and stops the run at its cap (SB3 calls it every env step)."""

    def __init__(self, model, folder: Path, spec: dict):
        self.model, self.folder, self.spec = model, folder, spec
        self.kept: list[dict] = []
        self.t0 = time.perf_counter()
        self.last_steps, self.last_t = 0, 0.0
        self.capped = False

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def keep(self) -> None:
        steps = int(self.model.num_timesteps)
        if self.kept and self.kept[-1]["env_steps"] == steps:
            return
        name = f"actor_{steps}.pt"
        self.model.actor.save(str(self.folder / name))
        self.kept.append({"env_steps": steps, "wall_s": self.elapsed(), "file": name})
        self.last_steps, self.last_t = steps, self.elapsed()
        print(f"sb3 {self.spec['algo']}: {steps} env steps, {self.elapsed():.1f} s", flush=True)

    def step(self) -> bool:
        s = self.spec
        if s["max_seconds"] is not None and self.elapsed() >= s["max_seconds"]:
            self.capped = True
            return False
        steps = int(self.model.num_timesteps)
        if steps - self.last_steps >= s["save_every_steps"] or (
            s["save_every_s"] is not None and self.elapsed() - self.last_t >= s["save_every_s"]
        ):
            self.keep()
        return True


def train(spec_path: Path) -> dict:
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    spec = json.loads(spec_path.read_text())
    torch.set_num_threads(int(spec["threads"]))
    model = build(spec)
    keeper = Keeper(model, spec_path.parent, spec)

    class Callback(BaseCallback):
        def _on_step(self) -> bool:
            return keeper.step()

    total = int(spec["settings"]["n_timesteps"])
    keeper.t0 = time.perf_counter()
    model.learn(total_timesteps=total, callback=Callback())
    keeper.keep()
    progress = {
        "run_id": uuid.uuid4().hex,
        **{k: spec[k] for k in ("algo", "env", "seed")},
        "checkpoints": keeper.kept,
        "finished": int(model.num_timesteps) >= total,
        "stopped_at_cap": keeper.capped,
        "env_steps": int(model.num_timesteps),
        "wall_s": keeper.elapsed(),
    }
    (spec_path.parent / "progress.json").write_text(json.dumps(progress, indent=1))
    return progress


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m synapto.bench.race.sb3_train SPEC.json")
    train(Path(sys.argv[1]))
