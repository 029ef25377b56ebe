# The two entry points a newcomer needs (README): `make demo` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: setup demo test test-core bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[spark,test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/groupcoord demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

test-core: $(STAMP)
	$(VENV)/bin/python -m pytest -q tests/core

bench: $(STAMP)
	$(VENV)/bin/python bench/core.py
	$(VENV)/bin/python bench/storage.py
	$(VENV)/bin/python bench/actors.py
	$(VENV)/bin/python bench/export.py

clean:
	rm -rf $(VENV) build *.egg-info
