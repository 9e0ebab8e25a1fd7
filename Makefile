# Every target installs what it needs first, so a newcomer types only `make demo` or `make test`.
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install demo test check format lock bench docs clean

$(VENV)/.installed: requirements/lock.txt pyproject.toml scripts/install.sh
	scripts/install.sh

install: $(VENV)/.installed

demo: install
	$(BIN)/python scripts/demo.py

check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/docs-check

# The suite (two pytest processes side by side, see scripts/run_tests.sh), then the CeleryExecutor
# deployment tests as a step of their own: they start a whole deployment, so they stay out of the
# suite's time. PYTEST_ARGS picks a part instead, run as one pytest process.
test: check
ifeq ($(strip $(PYTEST_ARGS)),)
	scripts/run_tests.sh
	$(BIN)/pytest -m celery
else
	$(BIN)/pytest -m "not celery" $(PYTEST_ARGS)
endif

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Re-resolve the pinned environment after changing dependencies in pyproject.toml.
lock:
	uv pip compile pyproject.toml --extra dev --extra celery --extra openlineage --python-version 3.11 -o requirements/lock.txt

# Benchmark: naive vs pipeline vs peers vs floor, all reading gzip parts from S3 (see
# benchmarks/run.py); BENCH_ARGS="--scaling 1000000,10000000,50000000" for the scaling series.
ENGINE ?= postgres
ROWS ?= 10000000
BENCH_ARGS ?=
bench: install
	$(BIN)/python -m benchmarks.run --engine $(ENGINE) --rows $(ROWS) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-uv .pytest_cache .mypy_cache .ruff_cache site build/docs-check

# The docs site (mkdocs-material) into site/; `make check` builds it too, strictly, into build/.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
