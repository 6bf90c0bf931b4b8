# Loop Console — two commands: `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
LOOP_TEST_DATA ?= $(CURDIR)/.loop-test-data
# The web server's port: `make run PORT=8001` when 8000 is taken.
PORT ?= 8000
# The agent CLIs `make dev` installs for the tests, each pinned to its major version.
AGENT_CLIS := @anthropic-ai/claude-code@2 @openai/codex@0 opencode-ai@1 @google/gemini-cli@0

.PHONY: run test test-fast install dev lint format clean bench

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@# bun (from the npm registry) for the tests of `script:` nodes with runtime: bun.
	@if command -v npm >/dev/null 2>&1 && [ ! -x $(VENV)/bin/bun ]; then \
		npm install -g --prefix $(VENV) --no-audit --no-fund --loglevel=error bun@1 >/dev/null \
		|| echo "bun could not be installed: the tests of runtime: bun will fail"; fi
	@# @ag-ui/client (from the npm registry) for the test that follows a run as an AG-UI client.
	@if [ ! -d $(VENV)/lib/node_modules/@ag-ui/client ]; then \
		if ! command -v npm >/dev/null 2>&1; then \
			echo "npm not found: @ag-ui/client is not installed and the AG-UI client test will fail"; \
		elif ! npm install -g --prefix $(VENV) --no-audit --no-fund --loglevel=error @ag-ui/client@1 >/dev/null; then \
			echo "@ag-ui/client could not be installed: the AG-UI client test will fail"; fi; fi
	@touch $@

# The agent CLIs (from the npm registry) the provider tests drive against scripted APIs
# (tests/providers/real_clis.py fails, naming the package, when one is missing). Its own
# stamp (holding the list), so that a change of AGENT_CLIS reinstalls them, and only then.
$(VENV)/.agent-clis: Makefile $(VENV)/.installed
	@if [ "$$(cat $@ 2>/dev/null)" = "$(AGENT_CLIS)" ]; then touch $@; \
	elif ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the agent CLIs are not installed and their tests will fail"; \
	elif npm install -g --prefix $(VENV) --no-audit --no-fund --loglevel=error \
		$(AGENT_CLIS) >/dev/null; then echo "$(AGENT_CLIS)" > $@; \
	else echo "the agent CLIs could not be installed: their tests will fail"; fi

install: $(VENV)/.installed

dev: $(VENV)/.dev-installed $(VENV)/.agent-clis

## Migrate, load the bundled recipes, create the first account, start web + worker.
run: install
	@$(PY) manage.py migrate --noinput -v 0
	@$(PY) manage.py recipe sync
	@$(PY) manage.py ensure_admin
	@$(PY) manage.py serve --port $(PORT)

## The whole suite (PostgreSQL + Redis when DATABASE_URL / REDIS_URL are set), browser
## tests included: a Chromium is found on the machine or installed first.
## TEST_WORKERS: pytest-xdist processes, each with its own database, queue, Celery worker
## and data folder; TEST_WORKERS=0 runs serially (docs/performance.md). Unless given, 4 for
## the suite or a folder of it; for PYTEST_ARGS naming only files (or tests in them, a
## file.py::test), one per file up to 4, and none for one file: starting workers would cost
## more than they save.
empty :=
space := $(empty) $(empty)
# The paths among PYTEST_ARGS (a test's file for file.py::name); those not ending in .py
# that exist are folders.
TEST_PATHS = $(foreach word,$(PYTEST_ARGS),$(firstword $(subst ::,$(space),$(word))))
TEST_FILES = $(sort $(filter %.py,$(TEST_PATHS)))
TEST_FOLDERS = $(wildcard $(filter-out %.py,$(TEST_PATHS)))
TEST_WORKERS ?= $(if $(and $(TEST_FILES),$(if $(TEST_FOLDERS),,yes)),$(if $(word 2,$(TEST_FILES)),$(if $(word 4,$(TEST_FILES)),4,$(words $(TEST_FILES))),0),4)
test: dev
	@mkdir -p $(LOOP_TEST_DATA)
	@# A Chromium for the browser tests: the machine's, else installed (tests/find_chromium.py).
	@$(if $(findstring not browser,$(PYTEST_ARGS)),true,$(PY) -m tests.find_chromium)
	@# bubblewrap, so that the suite runs sandboxed (tests/ensure_bubblewrap.py).
	@$(PY) -m tests.ensure_bubblewrap
	LOOP_TESTING=1 LOOP_DATA_DIR=$(LOOP_TEST_DATA) LOOP_QUEUE=loop-console-test-$$$$ \
		LOOP_PROVIDER_HOSTS=api.openai.com,api.anthropic.com,127.0.0.1,localhost \
		LOOP_PROVIDER_HTTP_HOSTS=127.0.0.1,localhost \
		$(VENV)/bin/pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS)) $(PYTEST_ARGS)

## `make test` without the slow tests: none that starts a real Celery worker, drives
## Chromium or builds the package (their markers, pyproject.toml), so no Chromium either.
test-fast: override PYTEST_ARGS += -m "not worker and not browser and not packaging"
test-fast: test

lint: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(LOOP_TEST_DATA) .pytest_cache
