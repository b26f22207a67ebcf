# Porpoise developer entry points. Everything runs from the project's own .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_DIR ?= .run
MASTERS ?= 3
WORKERS ?= 2
APIS ?= 1
PYTEST_ARGS ?=

.PHONY: install test run cluster stop clean lint bench bench-quick chaos ui ui-api browser ldap-server sql-servers hosts hosts-down

# Idempotent: re-installs only when pyproject.toml changed since the last install; the web UI is rebuilt
# only when its sources changed; the browser for the UI's end-to-end tests and the servers of the SQL and LDAP
# tests are installed when missing.
install: $(STAMP) ui browser sql-servers ldap-server

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,spark,examples]'
	@touch $(STAMP)

# The web UI (ui/, see ui/README.md): npm ci when the lockfile changed, vite build when a source changed.
UI_SOURCES := $(shell find ui/src ui/public -type f 2>/dev/null) ui/index.html ui/vite.config.ts ui/tsconfig.json
UI_DEPS    := ui/node_modules/.installed
UI_STAMP   := ui/dist/.built

ui: $(UI_STAMP)

$(UI_DEPS): ui/package-lock.json
	@command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq nodejs npm; } \
		|| { echo "make install: the web UI needs Node.js 20+ and npm (apt-get install nodejs npm)"; exit 1; }
	@# npm ci refuses a lockfile without the other platforms' optional packages (rollup's natives), which a
	@# registry mirror may not serve; npm install then installs the lockfile's versions all the same.
	cd ui && { npm ci --no-audit --no-fund --loglevel=error 2>/dev/null || npm install --no-save --no-audit --no-fund --loglevel=error; }
	@touch $@

$(UI_STAMP): $(UI_DEPS) $(UI_SOURCES)
	cd ui && npm run --silent build
	@touch $@

# Regenerate the committed API description and the UI's types from the route table (after an API change).
ui-api: $(STAMP) $(UI_DEPS)
	$(BIN)/python -m engine.api.openapi > ui/openapi.json
	cd ui && npm run --silent gen:api

# Headless Chromium (Debian's package) and a CJK font (the Chinese screens) for the UI's end-to-end tests.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium; } \
		|| { echo "make install: the UI tests need Chromium: apt-get install chromium (as root)"; exit 1; }
	@fc-list :lang=zh 2>/dev/null | grep -q . || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq fonts-noto-cjk; } \
		|| { echo "make install: the Chinese screens need a CJK font: apt-get install fonts-noto-cjk (as root)"; exit 1; }

# OpenLDAP's slapd (Debian's package) for the LDAP sign-in tests (they start it privately on loopback).
ldap-server:
	@test -x /usr/sbin/slapd || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slapd ldap-utils; } \
		|| { echo "make install: the LDAP tests need slapd: apt-get install slapd (as root)"; exit 1; }

# MariaDB and ClickHouse (Debian's packages) for the MYSQL and CLICKHOUSE data-source tests: the tests start
# them privately (tests/sql_servers.py); the packages' own services are not used.
sql-servers:
	@{ command -v mysqld || test -x /usr/sbin/mysqld; } >/dev/null && { command -v clickhouse-server || \
		test -x /usr/sbin/clickhouse-server; } >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server clickhouse-server; } \
		|| { echo "make install: the SQL tests need apt-get install mariadb-server clickhouse-server (as root)"; exit 1; }

test: install
	cd ui && npm run --silent test
	$(BIN)/python -m pytest --durations=40 $(PYTEST_ARGS)

# Standalone all-in-one: private etcd + PostgreSQL (data kept under $(RUN_DIR)/standalone) + nodes.
# SPARK=cluster: the example's Spark step on a Spark standalone cluster; SPARK=connect: through a Spark
# Connect server (combine: SPARK=cluster,connect). Default local: spark-submit local[2].
SPARK ?= local
run: install
	$(BIN)/porpoise standalone --run-dir $(RUN_DIR)/standalone --example --spark $(SPARK)

# Separate real processes on loopback (masters, workers, API servers); logs and pids under $(RUN_DIR)/cluster,
# the CLI's client file (API URL + admin token) at $(RUN_DIR)/cluster/client.json.
cluster: install
	$(BIN)/porpoise cluster start --run-dir $(RUN_DIR)/cluster --masters $(MASTERS) --workers $(WORKERS) --apis $(APIS)

stop:
	@if [ -x $(BIN)/porpoise ]; then $(BIN)/porpoise cluster stop --run-dir $(RUN_DIR)/cluster; fi

clean: stop
	rm -rf $(RUN_DIR) .pytest_cache .ruff_cache build *.egg-info ui/dist ui/test-results

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m engine.storage.schema_sql --check
	cd ui && npm run --silent lint && npm run --silent typecheck && npm run --silent check:api

bench: install
	$(BIN)/python -m bench

# The performance guard (under 3 minutes): the spawn limit and a reduced engine benchmark, each figure
# beside the reference `python -m bench full engine` recorded in docs/BENCHMARKS.md, as ratios to the
# spawn limit of the same run; exits 1 when one fell by more than 20 %. Run before submitting a change
# to the master, the worker, the RPC layer or the storage layer.
bench-quick: install
	$(BIN)/python -m bench.quick

# Long chaos soak (make test runs a short round): SEED=n WORKFLOWS=n, minutes to hours.
# FAULTS="poison=0 kill-master=2" sets fault weights (tests/chaos_faults.py).
WORKFLOWS ?= 2000
SEED ?= $(shell date +%s)
# HOSTS=n: the soak across n namespace hosts instead (tests/hosts_chaos.py, root): hosts killed, links
# cut, partitions from PostgreSQL; WORKFLOWS defaults to 2000 there too, so pass a smaller one by hand.
HOSTS ?=
FAULTS ?=
chaos: install
ifeq ($(HOSTS),)
	$(BIN)/python -m tests.chaos --workflows $(WORKFLOWS) --seed $(SEED) $(foreach f,$(FAULTS),--fault $(f))
else
	$(BIN)/python -m tests.hosts_chaos --hosts $(HOSTS) --workflows $(WORKFLOWS) --seed $(SEED)
endif

# N hosts on this machine (root: network namespaces on a bridge, 10.77.x.0/24): a 3-member etcd
# cluster, a master and a worker per host, PostgreSQL and the API on their own host (tests/hosts.py).
# Runs until Ctrl-C, then tears everything down; `make hosts-down` removes what a killed run left.
# SPARK=cluster (or 1): and a Spark standalone cluster, its master on a host of its own (spark://ADDR:7077,
# status http://ADDR:8080/json/), a Spark worker on each of the last two hosts.
# DELAY_MS=20: the hosts joined by the user-space delay switch (tests/delay_switch.py), 20 ms each way.
N ?= 3
hosts: install
	$(BIN)/python -m tests.hosts up --hosts $(N) $(if $(filter cluster 1,$(SPARK)),--spark) $(if $(DELAY_MS),--link-delay-ms $(DELAY_MS))

hosts-down: install
	$(BIN)/python -m tests.hosts down --all
