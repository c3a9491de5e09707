#!/bin/bash
# synapto evolve across nodes under Slurm: one MPI rank per core, rank 0 coordinates
# (it polls and sleeps, so it needs almost no CPU), ranks 1.. evaluate individuals.
# Print it with `synapto slurm-script > job.sh` (a checkout has it as scripts/slurm_evolve.sh).
#
#   OUT=runs/walker.h5 sbatch job.sh                          # the origin benchmark, 64 ranks
#   OUT=runs/a.h5 sbatch --nodes=4 --ntasks-per-node=16 job.sh --seed 13
#   OUT=runs/q.h5 CONFIG=quickstart sbatch job.sh
#
# One run per job, into $OUT.  A new run starts `synapto evolve --config "$CONFIG" --out "$OUT"`
# with the arguments after the script name (they override CONFIG).  When $OUT exists -- the
# job was requeued after preemption, a time limit or `scontrol requeue`, or submitted again --
# the script continues it with `synapto evolve --resume "$OUT"` (the run file holds its
# config; the arguments are not passed again) and a finished run ends at once.  Ahead of
# the kill Slurm sends SIGTERM (--signal below): the coordinator finishes the evaluations in
# flight, leaves the checkpoint whole and exits; --requeue lets Slurm start the job again.
# A rank that is lost (killed, a segfault, a node gone) ends the MPI job; synapto then starts
# it again within this job, continuing the run from its last checkpoint, at most RESTARTS
# times (evolve --restarts), and the run file is the uninterrupted run's.
# Environment variables (sbatch passes them on):
#   OUT       the run file (default runs/slurm-$SLURM_JOB_ID.h5: a requeued job keeps its id)
#   CONFIG    a config file or a shipped config's name (default bipedal_hebbian_dag)
#   PY        the Python with synapto (default: the one below)
#   RESTARTS  how often a job that lost a rank starts again (default 3; 0: it ends, exit != 0)
#   LAUNCHER  mpirun (default): the MPI's own launcher, which reads the allocation; the
#             one used is $SYNAPTO_MPIEXEC, else the mpiexec beside $PY (the mpich wheel's
#             Hydra, which starts its proxies with srun), else mpirun on $PATH;
#             srun: Slurm starts the ranks, with SRUN_MPI (default pmi2, which the mpich
#             wheel speaks; pmix needs a Slurm and an MPI built with PMIx)
# Needs: $PY and $OUT on file systems every node sees, and mpi4py built against the MPI
# that launches it (see docs/bench_evolve.md).  Results do not depend on the number of
# ranks; only /timing in the run file does.
#SBATCH --job-name=synapto-evolve
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=32
#SBATCH --cpus-per-task=1
#SBATCH --time=04:00:00
#SBATCH --output=synapto-evolve-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=B:TERM@120

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"

PY=${PY:-.venv/bin/python}
CONFIG=${CONFIG:-bipedal_hebbian_dag}
OUT=${OUT:-runs/slurm-${SLURM_JOB_ID:-0}.h5}
LAUNCHER=${LAUNCHER:-mpirun}                              # mpirun | srun
RANKS=${SLURM_NTASKS:-64}
RESTARTS=${RESTARTS:-3}

# numpy's BLAS must not start threads of its own: one rank per core already uses every core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

if [ -e "$OUT" ]; then
    echo "resuming $OUT (requeue ${SLURM_RESTART_COUNT:-0})"
    ARGS=(evolve --resume "$OUT")
else
    ARGS=(evolve --config "$CONFIG" --out "$OUT" "$@")
fi
echo "synapto evolve on ${SLURM_JOB_NUM_NODES:-?} node(s), $RANKS ranks: $(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | paste -sd ' ')"
if [ "$LAUNCHER" = srun ]; then
    # Slurm's own launcher; SRUN_MPI must be a PMI that the MPI speaks (pmi2, pmix, ...).
    export SYNAPTO_MPIEXEC=srun SLURM_MPI_TYPE=${SRUN_MPI:-pmi2}
else
    # The MPI's own launcher reads the Slurm allocation itself (MPICH/Hydra, Open MPI, Intel MPI).
    MPIEXEC=${SYNAPTO_MPIEXEC:-$(dirname "$PY")/mpiexec}
    [ -x "$MPIEXEC" ] || MPIEXEC=mpirun
    export SYNAPTO_MPIEXEC=$MPIEXEC
fi
# synapto starts `$SYNAPTO_MPIEXEC -n $RANKS` itself (--workers) and stays its parent: it replaces
# this shell (exec), so Slurm's SIGTERM to the batch shell (B:) reaches it and it passes the
# signal on to the coordinator; it starts the MPI job again after a lost rank (--restarts).
exec "$PY" -m synapto "${ARGS[@]}" --workers $((RANKS - 1)) --restarts "$RESTARTS"
