# Two commands on a fresh machine: `make demo` and `make test`. Both install what they need into .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/kqe-rdf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/kqe-rdf

demo: install
	$(BIN)/kqe-rdf demo

test: install
	$(BIN)/python -m pytest -q

test-slow: install
	$(BIN)/python -m pytest -q -m slow

.PHONY: install demo test test-slow
