# synapto — the commands a user runs. `make install` then `make test`; `make docs` builds the site.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

# Options for `make evolve` and the benchmarks (override on the command line).  `make evolve`
# reruns replace its run file (the same config and seed write the same file); FORCE= keeps it.
WORKERS ?= 2
CONFIG  ?= quickstart
FORCE   ?= --force

.PHONY: install test test-fast lint evolve clean wheel docs

install: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	$(PIP) install -e ".[mpich,plot,tensorboard,mujoco,tune,onnx,envpool,dev,docs]"
	touch $@

# SYNAPTO_REQUIRE_EXTRAS: a missing plot, mujoco or envpool extra (installed above) fails the tests instead of skipping them
test: install
	SYNAPTO_REQUIRE_EXTRAS=1 $(PY) -m pytest -q -ra --durations=20 -n 2 --dist loadfile -m "not long"

# The tests marked long, run on their own so that make test stays under 6 minutes on 2 cores
# (CI runs them after make test): each benchmark end to end (bench race, evolve, ppo, farm,
# envs, learn, sparsity), kill -9 of a fast-path run, of a whole `bench sparsity` and of a
# `tune` study, tune's search, every reader against damaged run files, BipedalWalker on 1, 2
# and 4 ranks and its fast path on 3, and 64 MPI ranks on the machine's cores (which would
# starve the tests beside it)
.PHONY: test-long
test-long: install
	SYNAPTO_REQUIRE_EXTRAS=1 $(PY) -m pytest -q -ra --durations=10 -n 2 --dist loadfile -m long

test-fast: install
	SYNAPTO_REQUIRE_EXTRAS=1 $(PY) -m pytest -q -ra -m "not mpi and not slow"

# ruff (lint, then formatting: --check only) and mypy ([tool.ruff], [tool.mypy] in pyproject.toml)
LINT_PATHS := synapto tests scripts examples
lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy synapto scripts

# Checks past one machine (root needed; not part of `make test`; docs/cluster.md, "More than one
# machine"): three hosts as network namespaces under mpiexec over TCP, and
# scripts/slurm_evolve.sh through sbatch on a one-node Slurm (installs slurm-wlm and munge).
.PHONY: test-multinode test-slurm
test-multinode: install
	$(PY) -m pytest -q -ra tests/cluster/test_multinode.py

test-slurm: install
	$(PY) -m pytest -q -ra tests/cluster/test_slurm.py

# The documentation site (mkdocs.yml: README.md as its home page, docs/*.md, the API reference
# from the docstrings) into site/, offline; --strict: any warning fails, a broken link or
# anchor, a page missing from the nav or a docstring mkdocstrings cannot read among them.
# NO_MKDOCS_2_WARNING: the theme's notice about its own future, printed on every build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

evolve: install
	$(PY) -m synapto evolve --config $(CONFIG) --workers $(WORKERS) $(FORCE)

# A wheel to install synapto outside a checkout (docs/install.md, "synapto is not on a package index yet"):
# dist/synapto_evo-<version>-py3-none-any.whl, the shipped configs and the Slurm script inside.
wheel: install
	rm -rf build
	$(PIP) wheel --no-deps --no-build-isolation --wheel-dir dist .

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache

# PPO benchmark: the origin's Spinning Up run (BipedalWalker-v3, hid 32 32, gamma 0.999,
# seeds 13 42 1337) at each process count in PROCS; the defaults take ~10 minutes on
# 2 cores.  `make bench-ppo EPOCHS=1000 STEPS=40000 PROCS="10 20 40"` is the full origin run.
EPOCHS ?= 60
STEPS  ?= 4000
PROCS  ?= 1 2
.PHONY: bench-ppo
bench-ppo: install
	$(PY) -m synapto bench ppo --epochs $(EPOCHS) --steps $(STEPS) --procs $(PROCS)

# Learning benchmark (docs/strategies.md): reference, ga, openai-es, pgpe and cmaes on
# LunarLander-v3, 5 seeds within 3 M env steps each (about an hour on 2 cores);
# LEARN_ARGS=--long runs BipedalWalker-v3 for hours per seed.
LEARN_ARGS ?=
.PHONY: bench-learn
bench-learn: install
	$(PY) -m synapto bench learn --workers $(WORKERS) $(LEARN_ARGS)

# Sparsity benchmark (docs/sparsity.md): pruned-mlp and hebbian-dag with pruning off and to
# 50 / 25 / 10 % of their connections, and the reference, on LunarLander-v3 (seeds 1-5, 3 M
# env steps each: 45 runs, about an hour on 2 idle cores) and BipedalWalker-v3 (seed 1, 10 M
# env steps a run with the shaped configs bipedal_fast and bipedal_hebbian, 9 runs).  SPARSITY_ARGS="--envs LunarLander-v3"
# for the LunarLander part only; a stopped benchmark resumes where it was.
SPARSITY_ARGS ?=
.PHONY: bench-sparsity
bench-sparsity: install
	$(PY) -m synapto bench sparsity --workers $(WORKERS) --keep-finished $(SPARSITY_ARGS)

# Evolution benchmark (docs/bench_evolve.md): evolve through the CLI at each worker count in
# BENCH_WORKERS (plus --schedule waves above 1 worker), for each seed; prints and writes
# bench/evolve_<agent>.md/.json/.png with the raw-environment ratio, the time breakdown
# and the projection to 24/40/64 ranks.  About 10 minutes on 2 idle cores.
BENCH_WORKERS ?= 1 2
BENCH_AGENT   ?= hebbian-dag
BENCH_SEEDS   ?= 13 41337
BENCH_ARGS    ?=
.PHONY: bench-evolve
bench-evolve: install
	$(PY) -m synapto bench evolve --agent $(BENCH_AGENT) --workers-list $(BENCH_WORKERS) --seed $(BENCH_SEEDS) $(BENCH_ARGS)

# Farm benchmark (docs/bench_farm.md): the coordinator's CPU per task and tasks/s at
# 1-64 worker ranks (oversubscribed on a small machine), then bipedal_solve and
# lunarlander_learn at 1 and 2 workers.  About 10 minutes on 2 idle cores.
.PHONY: bench-farm
bench-farm: install
	$(PY) -m synapto bench farm

# Throughput benchmarks (docs/throughput.md): CartPole-v1 steps/s against the number of
# environments per backend, and small-network timing (numpy, PyTorch when installed).
.PHONY: bench-envs bench-nn
bench-envs: install
	$(PY) -m synapto bench envs --workers $(WORKERS)

bench-nn: install
	$(PY) -m synapto bench nn
