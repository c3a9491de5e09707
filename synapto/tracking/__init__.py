"""Experiment tracking, shared by evolution and PPO: the callbacks protocol
(:mod:`~synapto.tracking.callbacks`), the built-in trackers (:mod:`~synapto.tracking.writers`)
and TensorBoard's event files (:mod:`~synapto.tracking.event_files`)."""
