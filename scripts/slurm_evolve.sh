#!/bin/bash
# synapto evolve across nodes under Slurm: one MPI rank per core, rank 0 coordinates
# (it polls and sleeps, so it needs almost no CPU), ranks 1.. evaluate individuals.
#
#   sbatch scripts/slurm_evolve.sh                                  # the origin benchmark, 64 ranks
#   sbatch --nodes=4 --ntasks-per-node=16 scripts/slurm_evolve.sh --seed 13
#   CONFIG=experiments/quickstart.toml sbatch scripts/slurm_evolve.sh
#
# Arguments after the script name are passed to `synapto evolve` (they override CONFIG).
# Submit from the checkout (the job runs in the folder sbatch was called from).
# Environment variables (sbatch passes them on):
#   CONFIG    the config file (default experiments/bipedal_hebbian_dag.toml)
#   PY        the Python with synapto (default .venv/bin/python)
#   LAUNCHER  mpirun (default): the MPI's own launcher, which reads the allocation; the
#             one used is $SYNAPTO_MPIEXEC, else the mpiexec beside $PY (the mpich wheel's
#             Hydra, which starts its proxies with srun), else mpirun on $PATH;
#             srun: Slurm starts the ranks, with SRUN_MPI (default pmi2, which the mpich
#             wheel speaks; pmix needs a Slurm and an MPI built with PMIx)
# Needs: the checkout and its .venv on a file system every node sees, and mpi4py built
# against the MPI that launches it (see docs/bench_evolve.md).  Results do not depend on
# the number of ranks; only /timing in the run file does.  `make test-slurm` runs this
# script through sbatch on a one-node Slurm, both ways.
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
    # Slurm's own launcher; SRUN_MPI must be a PMI that the MPI speaks (pmi2, pmix, ...).
    exec srun --mpi="${SRUN_MPI:-pmi2}" "$PY" -m synapto evolve --config "$CONFIG" "$@"
else
    # The MPI's own launcher reads the Slurm allocation itself (MPICH/Hydra, Open MPI, Intel MPI).
    MPIEXEC=${SYNAPTO_MPIEXEC:-$(dirname "$PY")/mpiexec}
    [ -x "$MPIEXEC" ] || MPIEXEC=mpirun
    exec "$MPIEXEC" -n "$RANKS" "$PY" -m synapto evolve --config "$CONFIG" "$@"
fi
