"""Batched policies: many genomes in lockstep on a numpy-batched environment.

- :mod:`~synapto.agents.batched.rows`     row bookkeeping shared by the built-in batch policies
- :mod:`~synapto.agents.batched.certify`  float32 forward passes whose Discrete decisions are
  certified equal to the one-row float64 policy's (the rest recomputed)
- :mod:`~synapto.agents.batched.mlp`, :mod:`~synapto.agents.batched.dag`  the built-in agents' batch policies

The interface they implement is :class:`synapto.agents.base.BatchPolicy`.
"""
