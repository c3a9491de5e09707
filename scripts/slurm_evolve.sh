#!/bin/bash
# synapto evolve across nodes under Slurm: one MPI rank per core, rank 0 coordinates
# (it polls and sleeps, so it needs almost no CPU), ranks 1.. evaluate individuals.
#
#   sbatch scripts/slurm_evolve.sh                                  # the origin benchmark, 64 ranks
#   sbatch --nodes=4 --ntasks-per-node=16 scripts/slurm_evolve.sh --seed 13
#   CONFIG=experiments/quickstart.toml sbatch scripts/slurm_evolve.sh
#
# Arguments after the script name are passed to `synapto evolve` (they override CONFIG).
# Needs: the checkout and its .venv on a file system every node sees, and mpi4py built
# against the MPI that launches it (see docs/bench_evolve.md).  Results do not depend on
# the number of ranks; only /timing in the run file does.
#SBATCH --job-name=synapto-evolve
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=32
#SBATCH --cpus-per-task=1
#SBATCH --time=04:00:00
#SBATCH --output=synapto-evolve-%j.out

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"

PY=${PY:-.venv/bin/python}                                # the project's venv (shared file system)
CONFIG=${CONFIG:-experiments/bipedal_hebbian_dag.toml}
LAUNCHER=${LAUNCHER:-mpirun}                              # mpirun | srun
RANKS=${SLURM_NTASKS:-64}

# numpy's BLAS must not start threads of its own: one rank per core already uses every core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

echo "synapto evolve on ${SLURM_JOB_NUM_NODES:-?} node(s), $RANKS ranks: $(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | paste -sd ' ')"
if [ "$LAUNCHER" = srun ]; then
    # Slurm's own launcher; SRUN_MPI must match how the MPI was built (pmix, pmi2, ...).
    exec srun --mpi="${SRUN_MPI:-pmix}" "$PY" -m synapto evolve --config "$CONFIG" "$@"
else
    # The MPI's own launcher reads the Slurm allocation itself (MPICH/Hydra, Open MPI, Intel MPI).
    exec mpirun -n "$RANKS" "$PY" -m synapto evolve --config "$CONFIG" "$@"
fi
