# The two entry points a newcomer needs (README): `make demo` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# Apache Kafka's broker and Java tools for tests/kafka/: the jars tools/kafka/pom.xml names,
# copied here by Maven (~/.m2 is its download cache); fetched again only when the pom changes.
KAFKA_POM   := tools/kafka/pom.xml
KAFKA_LIBS  := build/kafka-libs
KAFKA_STAMP := $(KAFKA_LIBS)/.fetched-$(shell cksum $(KAFKA_POM) | cut -d' ' -f1)

# Headless Chromium for the web view's browser test (tests/actors/test_live_lag_http.py), from
# Debian's packages (playwright drives it; it never downloads a browser of its own). Installed
# only when missing; CI runs as root on a clean machine.
CHROMIUM := /usr/bin/chromium

.PHONY: setup kafka-libs browser demo lint test test-core bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[spark,test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

$(KAFKA_STAMP): $(KAFKA_POM)
	rm -rf $(KAFKA_LIBS)
	mvn -q -B -f $(KAFKA_POM) dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	touch $(KAFKA_STAMP)

kafka-libs: $(KAFKA_STAMP)

browser:
	test -x $(CHROMIUM) || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

setup: $(STAMP) $(KAFKA_STAMP) browser

demo: $(STAMP)
	$(VENV)/bin/groupcoord demo

# Lint, format check and the public API's type check (tools/typecheck.py): part of `make test`.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/python tools/typecheck.py

# tests/multinode runs a multi-node Ray cluster of its own (and a local-cluster Spark): a
# driver belongs to one Ray cluster, so it is a second pytest process (tests/conftest.py).
test: lint $(STAMP) $(KAFKA_STAMP) browser
	$(VENV)/bin/python -m pytest -q
	$(VENV)/bin/python -m pytest -q tests/multinode

test-core: $(STAMP)
	$(VENV)/bin/python -m pytest -q tests/core

bench: $(STAMP) $(KAFKA_STAMP)
	$(VENV)/bin/python bench/core.py
	$(VENV)/bin/python bench/storage.py
	$(VENV)/bin/python bench/actors.py
	$(VENV)/bin/python bench/export.py
	$(VENV)/bin/python bench/wire.py
	$(VENV)/bin/python bench/wire_cpu.py
	$(VENV)/bin/python bench/wire_split.py
	$(VENV)/bin/python bench/assignors.py
	$(VENV)/bin/python bench/scale.py
	$(VENV)/bin/python bench/rebalance.py

clean:
	rm -rf $(VENV) build *.egg-info
