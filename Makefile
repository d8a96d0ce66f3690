# Two entry points for a fresh machine (see README): `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
EXAMPLE ?= instances/small/s-4n-12j-01.json

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

.PHONY: setup demo test lint bench docs
setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/optsched solve $(EXAMPLE) --time-limit 10

test: setup
	$(PY) -m pytest -q -p no:cacheprovider

lint: setup
	$(VENV)/bin/ruff check optsched tests benchmarks

bench: setup
	$(PY) -m pytest -q -m slow

docs: setup
	$(VENV)/bin/mkdocs build --strict   # the site in site/ (offline; mkdocs.yml)
