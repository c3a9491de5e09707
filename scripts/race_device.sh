#!/bin/bash
# The race on a 16-core machine: evolution against PPO on LunarLander-v3 at 1, 2, 4, 8 and
# 15 workers (2 to 16 cores), one seed, within about 10 minutes; then the processes table
# of PPO.  Writes OUT/w<W>/race.{md,json,png} per worker count, OUT/ppo_processes.md and
# OUT/race_device.md (all the tables, with the commands that made them), and
# OUT/projection/projection.{md,json}: the projection from all the runs together, with the
# model's figure at each run's own cores against its measurement.
#
#   scripts/race_device.sh [OUT]          # OUT defaults to bench/race_device
#
# Budgets are cut to fit: evolution is experiments/lunarlander_learn.toml stopped at
# 1.2 M env steps (its runs passed 200 at about 1.05 M, docs/compare.md) with 30 selection
# and 50 test episodes; PPO is experiments/ppo_lunarlander.toml for 45 epochs (0.74 M steps;
# its runs passed 200 at about 0.59 M).  PPO's 16 envs split over 2, 4, 8 or 16 processes:
# at 3, 5 and 9 cores it runs on 2, 4 and 8 (bench race's table says so).  The worker
# counts run from the most to the fewest, so that a cut-short session keeps the big ones.
# Environment: PY (default .venv/bin/python), SEED (1), WORKERS ("15 8 4 2 1"),
# EPISODES (tests per checkpointed policy, 20), POINTS (8).
set -euo pipefail
OUT=${1:-bench/race_device}
PY=${PY:-.venv/bin/python}
SEED=${SEED:-1}
WORKERS=${WORKERS:-15 8 4 2 1}
EPISODES=${EPISODES:-20}
POINTS=${POINTS:-8}
mkdir -p "$OUT/configs"
sed -e 's/^max_env_steps = .*/max_env_steps = 1_200_000/' -e 's/^test_episodes = .*/test_episodes = 50/' \
    experiments/lunarlander_learn.toml > "$OUT/configs/evolve_lunarlander.toml"
sed -e 's/^epochs = .*/epochs = 45/' -e 's/^test_episodes = .*/test_episodes = 50/' \
    experiments/ppo_lunarlander.toml > "$OUT/configs/ppo_lunarlander.toml"
nproc > "$OUT/cores.txt"
{
  echo "# bench race on $(nproc) cores ($(date -u +%Y-%m-%d), $(uname -m))"
  echo
  echo "Configs: $OUT/configs (lunarlander_learn.toml at 1.2 M env steps, ppo_lunarlander.toml at 45 epochs)."
  echo
} > "$OUT/race_device.md"
for W in $WORKERS; do
  # no --allow-load: a lent machine is idle, and a busy one should stop the script
  "$PY" -m synapto bench race --evolve-config "$OUT/configs/evolve_lunarlander.toml" \
      --ppo-config "$OUT/configs/ppo_lunarlander.toml" --workers "$W" --seeds "$SEED" \
      --points "$POINTS" --episodes "$EPISODES" --out-dir "$OUT/w$W"
  cat "$OUT/w$W/race.md" >> "$OUT/race_device.md"
done
# the projection from every worker count's runs together: the model's error against each of them
dirs=()
for W in $WORKERS; do dirs+=("$OUT/w$W"); done
"$PY" -m synapto bench race --project-only "${dirs[@]}" --out-dir "$OUT/projection"
cat "$OUT/projection/projection.md" >> "$OUT/race_device.md"
{
  echo "## PPO: what more processes buy"
  echo
  echo '```'
  echo "$PY scripts/bench_ppo_processes.py --epochs ppo_bipedal=1 ppo_lunarlander=4 --procs 1 2 4 8 16 --updates gathered allreduce"
  echo '```'
  echo
  "$PY" scripts/bench_ppo_processes.py --epochs ppo_bipedal=1 ppo_lunarlander=4 --procs 1 2 4 8 16 --updates gathered allreduce
} | tee "$OUT/ppo_processes.md" >> "$OUT/race_device.md"
echo "-> $OUT/race_device.md"
