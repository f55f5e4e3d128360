# Two commands on a fresh machine: `make demo` and `make test`. Both install what they need into .venv
# (and `make test` installs Debian's chromium for the browser tests when it is missing and it can).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/kqe-rdf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/kqe-rdf

# The browser tests need Debian's chromium; installed here as root (or with password-less sudo), otherwise
# they are skipped on a developer's machine and fail under CI (CI=true).
browser:
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else \
	    echo "chromium is missing and cannot be installed here (not root): browser tests will be skipped"; exit 0; fi; \
	  echo "installing Debian's chromium for the browser tests"; \
	  $$SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium >/dev/null \
	    || echo "chromium could not be installed: browser tests will be skipped (and fail under CI)"; }

demo: install
	$(BIN)/kqe-rdf demo

test: install browser
	$(BIN)/python -m pytest -q

test-slow: install
	$(BIN)/python -m pytest -q -m slow

.PHONY: install browser demo test test-slow
