"""Everything synapto writes to or reads from disk as HDF5: the only package importing h5py.

- :mod:`synapto.store.files`       primitives: create (whole, preallocated, checksummed), open
                                   (validated), append in place, rewrite-then-replace, ``--out`` checks
- :mod:`synapto.store.lock`        :class:`RunLock`, one writer per run file
- :mod:`synapto.store.evolve`      the evolution run file: layout, writer, resume rebuild
- :mod:`synapto.store.evolve_rows` its datasets with a row per generation, and a generation's row
- :mod:`synapto.store.ppo`         the PPO run file: layout, writer, resume
- :mod:`synapto.store.checkpoint`  the checkpoint beside an evolution run (``RUN.h5.ckpt``)
- :mod:`synapto.store.reader`      :class:`RunData`, the one reader of run files
- :mod:`synapto.store.compare`     "identical outside /timing" for two run files
- :mod:`synapto.store.series`      a run's statistics as ``synapto plot`` and ``export`` read them

The store knows file layouts, not algorithms: writers take the run's config as an
object with a ``to_json()`` and the few sizes they need, readers hand back the config
as stored (JSON) for the caller to parse.
"""

from synapto.store.checkpoint import Checkpoint, checkpoint_path, read_checkpoint, write_checkpoint
from synapto.store.compare import datasets, differences
from synapto.store.evolve import EvolveRunWriter, grow, rebuild_prefix
from synapto.store.evolve_rows import STATS, TIMING, Extras
from synapto.store.files import FORMAT, FORMAT_VERSION, is_disk_full, writing
from synapto.store.lock import RunLock, check_not_in_use, check_output_path, check_writable, lock_path
from synapto.store.ppo import PROGRESS_COLUMNS, PPORunWriter, prepare_resume
from synapto.store.reader import Champion, PPORun, RunData, SelectionData

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "STATS",
    "TIMING",
    "PROGRESS_COLUMNS",
    "check_output_path",
    "check_writable",
    "is_disk_full",
    "writing",
    "RunLock",
    "check_not_in_use",
    "lock_path",
    "EvolveRunWriter",
    "Extras",
    "grow",
    "rebuild_prefix",
    "PPORunWriter",
    "prepare_resume",
    "Checkpoint",
    "checkpoint_path",
    "read_checkpoint",
    "write_checkpoint",
    "RunData",
    "PPORun",
    "Champion",
    "SelectionData",
    "datasets",
    "differences",
]
