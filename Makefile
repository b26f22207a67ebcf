# Porpoise developer entry points. Everything runs from the project's own .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_DIR ?= .run
MASTERS ?= 3
WORKERS ?= 2
PYTEST_ARGS ?=

.PHONY: install test run cluster stop clean lint bench chaos hosts hosts-down

# Idempotent: re-installs only when pyproject.toml changed since the last install.
install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Standalone all-in-one: private etcd + PostgreSQL (data kept under $(RUN_DIR)/standalone) + nodes.
run: install
	$(BIN)/porpoise standalone --run-dir $(RUN_DIR)/standalone --example

# Separate real processes on loopback; logs and pids under $(RUN_DIR)/cluster.
cluster: install
	$(BIN)/porpoise cluster start --run-dir $(RUN_DIR)/cluster --masters $(MASTERS) --workers $(WORKERS)

stop:
	@if [ -x $(BIN)/porpoise ]; then $(BIN)/porpoise cluster stop --run-dir $(RUN_DIR)/cluster; fi

clean: stop
	rm -rf $(RUN_DIR) .pytest_cache .ruff_cache build *.egg-info

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: install
	$(BIN)/python -m bench

# Long chaos soak (make test runs a short round): SEED=n WORKFLOWS=n, minutes to hours.
WORKFLOWS ?= 2000
SEED ?= $(shell date +%s)
# HOSTS=n: the soak across n namespace hosts instead (tests/hosts_chaos.py, root): hosts killed, links
# cut, partitions from PostgreSQL; WORKFLOWS defaults to 2000 there too, so pass a smaller one by hand.
HOSTS ?=
chaos: install
ifeq ($(HOSTS),)
	$(BIN)/python -m tests.chaos --workflows $(WORKFLOWS) --seed $(SEED)
else
	$(BIN)/python -m tests.hosts_chaos --hosts $(HOSTS) --workflows $(WORKFLOWS) --seed $(SEED)
endif

# N hosts on this machine (root: network namespaces on a bridge, 10.77.x.0/24): a 3-member etcd
# cluster, a master and a worker per host, PostgreSQL and the API on their own host (tests/hosts.py).
# Runs until Ctrl-C, then tears everything down; `make hosts-down` removes what a killed run left.
N ?= 3
hosts: install
	$(BIN)/python -m tests.hosts up --hosts $(N)

hosts-down: install
	$(BIN)/python -m tests.hosts down --all
