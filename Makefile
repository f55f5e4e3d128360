# Two commands on a fresh machine: `make demo` and `make test`. Both install what they need into .venv
# (and `make test` installs the [scale] extra for the Milvus and Ray tests, Debian's chromium for the browser tests, Debian's virtuoso-opensource for the
# remote-store tests and Debian's wordnet-base for the reader when they are missing and it can).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/kqe-rdf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/kqe-rdf

# $(call debian,COMMAND,PACKAGE,TESTS): install Debian's PACKAGE when COMMAND (or a file, by its path) is missing, as root (or with
# password-less sudo); otherwise TESTS are skipped on a developer's machine and fail under CI (CI=true).
define debian
	@command -v $(1) >/dev/null 2>&1 || [ -x /usr/bin/$(1) ] || [ -e $(1) ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else \
	    echo "$(2) is missing and cannot be installed here (not root): $(3) will be skipped"; exit 0; fi; \
	  echo "installing Debian's $(2) for $(3)"; \
	  $$SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $(2) >/dev/null \
	    || echo "$(2) could not be installed: $(3) will be skipped (and fail under CI)"; }
endef

# The index-backend tests run on Milvus (milvus-lite, and the real server for the vectors) and the sharded embedding
# on Ray: the [scale] extra, which the default install (and `make demo`) leaves out.
scale: install
	@$(BIN)/python -c "import pymilvus, milvus_lite, ray, milvus" 2>/dev/null || $(BIN)/pip install --quiet -e '.[test,scale]'

# The browser tests drive Debian's chromium.
browser:
	$(call debian,chromium,chromium,the browser tests)

# The remote-store tests run against OpenLink Virtuoso too (they start it on loopback themselves).
virtuoso:
	$(call debian,virtuoso-t,virtuoso-opensource,the Virtuoso remote-store tests)

# The offline reader reads relation words by meaning with WordNet 3.0 (Debian's wordnet-base, kqe_rdf/kb/lexicon.py).
wordnet:
	$(call debian,/usr/share/wordnet/data.noun,wordnet-base,the reader's lexical matching (and its tests))

demo: install wordnet
	$(BIN)/kqe-rdf demo

test: install scale browser virtuoso wordnet
	$(BIN)/python -m pytest -q

# The tests without servers, browsers, subprocesses, real datasets or big inputs (`slow`), on every core
# (pytest-xdist): under 3 minutes on two idle cores. `make test` runs everything, in one process.
test-quick: install wordnet
	$(BIN)/python -m pytest -q -m "not slow" -n auto

test-slow: install scale browser virtuoso wordnet
	$(BIN)/python -m pytest -q -m slow

.PHONY: install scale browser virtuoso wordnet demo test test-quick test-slow
