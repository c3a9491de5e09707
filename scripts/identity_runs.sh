#!/bin/bash
# Small run files of every strategy, the batched CartPole path, a Hebbian DAG, a shaped
# BipedalWalker generation, PPO (1 and 2 processes; full-batch and minibatch updates) and a
# resumed run, written to OUT; then, with a second directory, every file the reference holds
# compared dataset by dataset (outside /timing).
# A refactoring that claims "no result changes" runs this on the tree before and after:
#
#   git stash; scripts/identity_runs.sh /tmp/before; git stash pop
#   scripts/identity_runs.sh /tmp/after /tmp/before     # exit 1 and the differences, if any
#
# About 2 minutes on 2 cores.  PY defaults to .venv/bin/python.
set -euo pipefail
OUT=${1:?usage: scripts/identity_runs.sh OUT [REFERENCE_DIR]}
REF=${2:-}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
run() { "$PY" -m synapto -q "$@" --force > "$OUT/log.txt" 2>&1 || { cat "$OUT/log.txt"; exit 1; }; }
COMMON=(--env CartPole-v1 --population 8 --generations 3 --episodes 2 --hidden 4 --seed 3
        --test-episodes 4 --validate-episodes 4 --select-episodes 2 --workers 2)
for s in ga openai-es pgpe cmaes ars; do
  run evolve "${COMMON[@]}" --strategy "$s" --batch off --out "$OUT/$s.h5"
done
run evolve "${COMMON[@]}" --batch auto --out "$OUT/batched.h5"
run evolve "${COMMON[@]}" --agent hebbian-dag --batch off --out "$OUT/hebbian.h5"
run evolve --config bipedal_fast --population 8 --generations 2 --episodes 1 --validate-top 1 \
    --validate-episodes 1 --select-episodes 0 --test-episodes 1 --max-env-steps 0 --workers 2 \
    --out "$OUT/bipedal_shaped.h5"
run evolve "${COMMON[@]}" --generations 2 --strategy openai-es --batch off --out "$OUT/resumed.h5"
"$PY" -m synapto -q evolve --resume "$OUT/resumed.h5" --generations 4 --workers 1 > "$OUT/log.txt" 2>&1
run ppo --env CartPole-v1 --hid 8 --epochs 3 --steps-per-epoch 400 --seed 5 --test-episodes 3 --out "$OUT/ppo.h5"
run ppo --env CartPole-v1 --hid 8 --epochs 3 --steps-per-epoch 400 --seed 5 --test-episodes 3 --cpu 2 \
    --out "$OUT/ppo_2.h5"
run ppo --env Pendulum-v1 --hid 8 --epochs 2 --steps-per-epoch 480 --n-envs 4 --obs-norm --reward-scale \
    --minibatch-size 40 --update-epochs 2 --max-grad-norm 0.5 --target-kl 0 --seed 5 --cpu 2 --out "$OUT/ppo_minibatch_2.h5"
echo "run files in $OUT"
[ -z "$REF" ] && exit 0
# The comparison is written here rather than taken from synapto.store.compare: it must not
# depend on the code under change, and it covers attributes (the config, the layout) too.
"$PY" - "$OUT" "$REF" <<'EOF'
import sys
from pathlib import Path

import h5py
import numpy as np

def contents(path):
    out = {}
    with h5py.File(path, "r", locking=False) as f:
        def visit(name, obj):
            if name.split("/")[0] == "timing":
                return
            for k, v in obj.attrs.items():
                out[f"{name}@{k}"] = np.asarray(v)
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]
        f.visititems(visit)
        for k, v in f.attrs.items():  # the root's, but for what names a file and not a result
            if k not in ("created", "run_id", "versions"):
                out[f"/@{k}"] = np.asarray(v)
    return out

new, ref = Path(sys.argv[1]), Path(sys.argv[2])
bad = 0
for a in sorted(ref.glob("*.h5")):
    da, db = contents(a), contents(new / a.name)
    differ = [k for k in sorted(set(da) | set(db)) if k not in da or k not in db
              or np.asarray(da[k]).tobytes() != np.asarray(db[k]).tobytes()]
    print(f"{a.name}: {'identical' if not differ else 'DIFFERS in ' + ', '.join(differ[:8])}")
    bad += bool(differ)
sys.exit(1 if bad else 0)
EOF
