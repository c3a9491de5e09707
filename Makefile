# synapto — the commands a user runs. `make install` then `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

# Options for `make evolve` and the benchmarks (override on the command line).
WORKERS ?= 2
CONFIG  ?= experiments/quickstart.toml

.PHONY: install test test-fast evolve clean

install: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	$(PIP) install -e ".[plot,dev]"
	touch $@

test: install
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not mpi and not slow"

evolve: install
	$(PY) -m synapto evolve --config $(CONFIG) --workers $(WORKERS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
