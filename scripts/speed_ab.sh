#!/bin/bash
# The speed of this tree against a commit, on the hot paths, each in one process: the batched
# CartPole run (4,096 Hebbian DAGs), its evaluation and the GA's update at that population; the
# BipedalWalker run on envpool (bipedal_fast.toml, 40,000 env steps) and its evaluation; PPO's
# epochs (LunarLander, minibatch updates).  Rounds alternate the two trees path by path (A B A B
# ...), so that a machine's changing load falls on both; each path prints the medians and their
# ratio REF / this tree (above 1: this tree is faster).  A refactoring that claims "no path is
# slower" runs it before the merge, beside scripts/identity_runs.sh:
#
#   scripts/speed_ab.sh main          # 3 rounds
#   scripts/speed_ab.sh 8e2a0e2 5
#
# Commands count the CPU seconds (user + sys) of the whole process (importing envpool takes
# about 4 of bipedal's); the evaluations and the GA's update are the sums of the run file's
# /timing/eval_wall and /timing/update (wall seconds), PPO's epochs the sum of its /timing/cpu.
# A path REF cannot run (an option it lacks) prints n/a.  REF's tree is exported with git
# archive into a temporary folder; this tree is the working tree, changes included.  About 3
# minutes on 2 cores.  PY defaults to .venv/bin/python.
set -euo pipefail
REF=${1:?usage: scripts/speed_ab.sh REF [ROUNDS]}
ROUNDS=${2:-3}
PY=${PY:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") # the runs start in a folder of their own
HERE=$(pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/ref"
git archive "$REF" | tar -x -C "$TMP/ref"
echo "speed A/B: $REF ($(git rev-parse --short "$REF")) against this tree, $ROUNDS rounds; $(uptime | sed 's/.*load/load/')"

CARTPOLE=(evolve --env CartPole-v1 --agent hebbian-dag --hidden 8 --population 4096 --generations 4 --episodes 1
          --seed 1 --strategy ga --validate-episodes 0 --select-episodes 0 --test-episodes 0 --max-env-steps 0)
BIPEDAL=(evolve --config "$HERE/experiments/bipedal_fast.toml" --max-env-steps 40000 --validate-episodes 0
         --select-episodes 0 --test-episodes 0)
PPO=(ppo --env LunarLander-v3 --hid 64 64 --epochs 4 --steps-per-epoch 8192 --n-envs 16 --minibatch-size 64
     --update-epochs 4 --test-episodes 0 --seed 1)

# The measures: "cpu LOG COMMAND..." runs COMMAND (its output to LOG) and prints its CPU seconds,
# n/a if it failed; "sum FILE FIGURE" prints the sum of a run file's /timing/FIGURE (n/a: no file).
cat > "$TMP/measure.py" <<'PYTHON'
import resource
import subprocess
import sys

if sys.argv[1] == "cpu":
    with open(sys.argv[2], "w") as log:
        code = subprocess.call(sys.argv[3:], stdout=log, stderr=subprocess.STDOUT)
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{r.ru_utime + r.ru_stime:.3f}" if code == 0 else "n/a")
else:
    import h5py
    import numpy as np

    try:
        with h5py.File(sys.argv[2], "r", locking=False) as f:
            print(f"{np.nansum(f['timing'][sys.argv[3]][: int(f['completed'][0])]):.3f}")
    except (OSError, KeyError):
        print("n/a")
PYTHON

# run SIDE NAME ARGS...: the command on SIDE's tree (ref or new), writing $TMP/SIDE-NAME.h5; records its
# CPU seconds, or n/a where REF's tree fails it (this tree's failure ends the script with its output)
run() {
  local side=$1 name=$2 tree=$TMP/ref value
  shift 2
  [ "$side" = new ] && tree=$HERE
  rm -f "$TMP/$side-$name.h5"
  value=$(cd "$TMP" && PYTHONPATH="$tree" "$PY" measure.py cpu "$side-$name.log" \
          "$PY" -m synapto -q "$@" --out "$TMP/$side-$name.h5" --force)
  if [ "$value" = n/a ] && [ "$side" = new ]; then
    cat "$TMP/$side-$name.log" >&2
    echo "this tree failed: $name" >&2
    exit 1
  fi
  echo "$side $name $value" >> "$TMP/results.txt"
}

# timing SIDE NAME FIGURE PATH: records as PATH the sum of /timing/FIGURE in $TMP/SIDE-NAME.h5
timing() {
  echo "$1 $4 $("$PY" "$TMP/measure.py" sum "$TMP/$1-$2.h5" "$3")" >> "$TMP/results.txt"
}

: > "$TMP/results.txt"
for r in $(seq "$ROUNDS"); do
  for side in ref new; do
    run "$side" cartpole "${CARTPOLE[@]}"
    timing "$side" cartpole eval_wall cartpole-eval
    timing "$side" cartpole update ga-update
  done
  for side in ref new; do
    run "$side" bipedal "${BIPEDAL[@]}"
    timing "$side" bipedal eval_wall bipedal-eval
  done
  for side in ref new; do
    run "$side" ppo "${PPO[@]}"
    timing "$side" ppo cpu ppo-epochs
  done
  echo "round $r of $ROUNDS done"
done
"$PY" - "$TMP/results.txt" "$REF" <<'PYTHON'
import sys
from collections import defaultdict

import numpy as np

seen = defaultdict(list)
for line in open(sys.argv[1]):
    side, path, value = line.split()
    seen[side, path].append(value)
units = {"cartpole": "CPU s", "cartpole-eval": "wall s", "ga-update": "wall s", "bipedal": "CPU s",
         "bipedal-eval": "wall s", "ppo": "CPU s", "ppo-epochs": "CPU s"}
print(f"{'path':24s} {sys.argv[2][:12]:>12s} {'this tree':>12s} {'ratio':>8s}")
for path, unit in units.items():
    name = f"{path} ({unit})"
    ref, new = seen["ref", path], seen["new", path]
    if not ref or "n/a" in ref + new:
        print(f"{name:24s} {'n/a':>12s} {'n/a':>12s} {'n/a':>8s}")
        continue
    old, now = (float(np.median(np.array(v, float))) for v in (ref, new))
    print(f"{name:24s} {old:12.2f} {now:12.2f} {old / now:8.2f}")
PYTHON
echo "$(uptime | sed 's/.*load/load/') at the end"
