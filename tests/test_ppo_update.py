"""The single-process update's two threads change nothing but the wall time."""

import threading

import numpy as np
import pytest
from conftest import assert_same_run

from synapto.common.errors import UsageError
from synapto.ppo.config import PPOConfig
from synapto.ppo.threads import update_threads
from synapto.ppo.train import train
from synapto.store import PPORun

CFG = PPOConfig(
    env="Pendulum-v1",
    hid=(8, 8),
    steps_per_epoch=400,
    epochs=2,
    train_pi_iters=6,
    train_v_iters=9,
    target_kl=1e9,
    seed=5,
)


def _run(tmp_path, monkeypatch, threads: str):
    monkeypatch.setenv("SYNAPTO_PPO_THREADS", threads)
    return train(CFG, tmp_path / f"t{threads}.h5", log=lambda _: None)


def test_concurrent_value_loop_is_bit_identical_to_sequential(tmp_path, monkeypatch):
    import synapto.ppo.train as train_module

    started = []

    class CountingThread(threading.Thread):
        def start(self):
            started.append(self.name)
            super().start()

    monkeypatch.setattr(train_module.threading, "Thread", CountingThread)
    one = _run(tmp_path, monkeypatch, "1")
    assert started == []
    two = _run(tmp_path, monkeypatch, "2")
    assert started == ["ppo-value-update"] * CFG.epochs
    assert_same_run(one, two)
    with PPORun(two) as run:
        # both loops ran all their steps (no early stop at this target_kl) and were timed
        assert run.stats("StopIter").tolist() == [5.0, 5.0]
        update, pi, v = run.timing("update"), run.timing("update_pi"), run.timing("update_v")
        assert np.all(update > 0) and np.all(pi > 0) and np.all(v > 0)


def test_bad_thread_setting_is_refused(monkeypatch):
    monkeypatch.setenv("SYNAPTO_PPO_THREADS", "3")
    with pytest.raises(UsageError, match="SYNAPTO_PPO_THREADS must be 1 or 2"):
        update_threads()


def test_files_without_the_update_timing_still_read_and_resume(tmp_path, monkeypatch):
    """Run files written before ``/timing/update`` existed: NaN for it, and resumable."""
    import dataclasses

    import h5py

    path = _run(tmp_path, monkeypatch, "2")
    with h5py.File(path, "a") as f:
        del f["timing/update"]
    with PPORun(path) as run:
        assert np.isnan(run.timing("update")).all() and len(run.timing("update")) == CFG.epochs
    train(dataclasses.replace(CFG, epochs=CFG.epochs + 1), path, resume=True, log=lambda _: None)
    with PPORun(path) as run:
        assert run.completed == CFG.epochs + 1
        update = run.timing("update")
        assert np.isnan(update[: CFG.epochs]).all() and update[CFG.epochs] > 0
