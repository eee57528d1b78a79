# Each target creates the virtual environment it needs, so a fresh clone works with one command.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1

.PHONY: demo test lint bench stress clean

$(VENV)/.stamp-base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.stamp-dev: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.stamp-base
	$(PY) -m tideline.demo

test: $(VENV)/.stamp-dev
	$(PY) -m pytest -q

lint: $(VENV)/.stamp-dev
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

# Loaded stores are kept in $(BENCH_STORES) and reused: loading 100k facts through e5
# takes most of an hour on two cores; later runs measure the queries only.
BENCH_STORES ?= .bench-stores

$(VENV)/.stamp-bench: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install -q -e '.[bench]'
	touch $@

# The LoCoMo split is CC BY-NC and lives beside the project, never in it.
LOCOMO ?= ../shared/bench/locomo-dev

bench: $(VENV)/.stamp-bench
	$(PY) -m tideline.bench real
	$(PY) -m tideline.bench conversation
	$(PY) -m tideline.bench recall --sizes 10000,100000 --keep $(BENCH_STORES)
	$(PY) -m tideline.bench multihop
	$(PY) -m tideline.bench sleep --n 100000
	if [ -f $(LOCOMO)/turns.jsonl ]; then $(PY) -m tideline.bench locomo --data $(LOCOMO) \
		--import-n 200; fi

stress: $(VENV)/.stamp-dev
	$(PY) -m pytest -q -m stress

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(BENCH_STORES)
