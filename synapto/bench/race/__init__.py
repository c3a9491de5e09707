"""``synapto bench race``: evolution against its rivals on the same cores, wall time to threshold.

For each task (an ``--evolve-config``, paired with a ``--ppo-config`` of the same env
and/or raced against ``--sb3 tqc`` / ``sac``: Stable-Baselines3 with rl-baselines3-zoo's
settings, :mod:`.sb3`) and seed, the race runs every method itself, one after the
other on the same cores (evolution with ``W`` workers and its coordinator, PPO with as
many processes, :mod:`.runs`; SB3 as one process with as many torch threads), the order
reversed from seed to seed.  With ``--shared-coordinator`` every method gets ``W``
cores instead: the coordinator, idle while its workers evaluate, shares them (as
``evolve --workers 2`` does on a 2-core machine), and PPO runs ``W`` processes.
``--max-minutes M`` caps each run.  It then tests each run's checkpointed policies as
``bench compare`` does (:mod:`synapto.bench.compare`) and reports, per run: wall time
and env steps to each of the task's thresholds, the final test, CPU seconds, the other
load seen just before it (:mod:`.load`); then the projection to 2-1,024 cores
(:mod:`.projection`, :mod:`.model`).  ``--project-only RACE...`` projects again from
earlier races' race.json and run files, running and testing nothing (:mod:`.reproject`).
The race itself is :mod:`.racing`, its command line :mod:`.cli`.

Before it starts, the race measures the machine's other load and refuses (one line,
exit 2) when it would bias the wall times, unless ``--allow-load``; the figures are in
the report either way.  Outputs in ``--out-dir``: ``race.md``, ``race.json`` (``runs``:
one entry per method, task and seed; ``projection``: per task and threshold, the cores
and each method's projected seconds), ``race.png`` (tested return against env steps and
wall time), the run files and logs in ``runs/``, the test cache ``race_cache.json``.
"""

from __future__ import annotations

from synapto.bench.race.cli import RaceOptions, register
from synapto.common.declare import multi_value_flags

__all__ = ["MULTI_VALUE_OPTIONS", "register"]

#: options taking several space-separated values (see synapto.cli.build_app)
MULTI_VALUE_OPTIONS = multi_value_flags(RaceOptions)
