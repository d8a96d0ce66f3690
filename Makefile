# Two entry points for a fresh machine (see README): `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
EXAMPLE ?= instances/small/s-4n-12j-01.json

# the core install: solve, check, gen, simulate and the shipped learned policy (no torch)
$(VENV)/.core: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

# the test suite's needs: the `dev` extra (tools, and every extra the tests exercise, torch included)
$(VENV)/.installed: $(VENV)/.core
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

.PHONY: setup demo test lint bench docs
setup: $(VENV)/.installed

demo: $(VENV)/.core
	$(VENV)/bin/optsched solve $(EXAMPLE) --time-limit 10

test: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check optsched tests benchmarks
	$(VENV)/bin/mypy   # the typed layers listed in pyproject.toml [tool.mypy]

bench: $(VENV)/.installed
	$(PY) -m pytest -q -m slow

docs: $(VENV)/.installed
	$(VENV)/bin/mkdocs build --strict   # the site in site/ (offline; mkdocs.yml)
