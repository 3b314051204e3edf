# The two commands a newcomer needs: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.installed-stamp
# Bytecode is written (into the gitignored __pycache__), even where the environment says not to:
# without it every process the tests start (pytest's workers, Celery workers, gunicorns,
# commands) compiled the project's modules again, and pytest rewrote every test module again in
# every run (11% of the CPU of the tests that start workers).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-slow install lint format bench mutation clean messages

# What the platform itself needs (all `make demo` installs) …
$(RUNTIME): pyproject.toml
	@echo "== installing the platform's packages into $(VENV) (about a minute on a fresh machine)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --progress-bar on -e .
	touch $(RUNTIME)

# … and the development extras the tests, lint and benchmarks need (`make test` adds them).
$(STAMP): $(RUNTIME)
	@echo "== installing the test and development packages (a few minutes on a fresh machine)"
	$(BIN)/pip install --progress-bar on -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## Set up, load the demo set and serve on http://127.0.0.1:8000 (SQLite, Celery eager).
demo: $(RUNTIME)
	DJANGO_DEBUG=1 $(BIN)/python manage.py migrate --noinput
	DJANGO_DEBUG=1 $(BIN)/python manage.py load_demo
	DJANGO_DEBUG=1 $(BIN)/python manage.py runserver 127.0.0.1:8000

## The whole test suite (PostgreSQL/Redis when DATABASE_URL/CELERY_BROKER_URL are set), in
## parallel: pytest-xdist, one worker more than the cores (PYTEST_WORKERS=0: one process).
test: $(STAMP)
	SECRET_KEY=$${SECRET_KEY:-test-only-secret-key} $(BIN)/pytest -n $${PYTEST_WORKERS:-auto} --dist worksteal $(PYTEST_ARGS)

## The slow tier, left out of `make test` (CI runs both): tests/test_two_hosts.py (needs root:
## network namespaces and a PostgreSQL cluster of its own), the hostile sweeps at full depth
## (tests/hostile), the browser sweeps of every page (phone width, axe, Chinese), the tests
## that run servers of their own (the login throttle under gunicorn, a Redis outage, migrating a
## demo database) and those that kill a Celery worker mid-job. In parallel as `make test`; the
## two-host test starts first, in a worker of its own.
test-slow: $(STAMP)
	SECRET_KEY=$${SECRET_KEY:-test-only-secret-key} $(BIN)/pytest -m slow -n $${PYTEST_WORKERS:-auto} --dist worksteal $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	SECRET_KEY=$${SECRET_KEY:-bench-only-secret-key} $(BIN)/python -m bench

## The message catalogues (locale/): collect the strings of the code, templates and scripts into
## the .po files (translations kept), then compile the .mo files, which are committed (so that
## `make demo` needs no GNU gettext). Needs GNU gettext (xgettext, msgfmt).
MESSAGE_IGNORES := --ignore=.venv --ignore=staticfiles --ignore=media --ignore=tests --ignore=bench
messages: $(RUNTIME)
	SECRET_KEY=$${SECRET_KEY:-messages-only} $(BIN)/python manage.py makemessages -l zh_Hans --no-obsolete $(MESSAGE_IGNORES) --ignore=static
	SECRET_KEY=$${SECRET_KEY:-messages-only} $(BIN)/python manage.py makemessages -d djangojs -l zh_Hans --no-obsolete $(MESSAGE_IGNORES) --ignore=static/vendor
	SECRET_KEY=$${SECRET_KEY:-messages-only} $(BIN)/python manage.py compilemessages $(MESSAGE_IGNORES)

## Mutation testing of h2htalk/stats/ and annotation/queue.py (README: Mutation testing).
mutation: $(STAMP)
	$(BIN)/python -m bench mutation $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) db.sqlite3 media staticfiles
