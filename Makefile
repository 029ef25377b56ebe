# The two entry points a newcomer needs (README): `make demo` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes. uv installs (48 s
# here against pip's 123 s, warm caches); it compiles the dependencies' bytecode as pip does.
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

.PHONY: setup kafka-libs browser bytecode demo lint test test-core bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q uv==0.13.9
	$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python --compile-bytecode -e '.[spark,test]'
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

# The project's own modules compiled ahead (pip compiled the dependencies'): every Ray worker,
# CLI and serve process imports them, and with PYTHONDONTWRITEBYTECODE set (as on CI machines)
# each would compile them again, about half a second a process. Only changed files recompile.
SOURCES := actors coordinator storage wire spark_export tests
bytecode: $(STAMP)
	$(VENV)/bin/python -m compileall -q $(SOURCES) > /dev/null

demo: $(STAMP) bytecode
	$(VENV)/bin/groupcoord demo

# Lint, format check and the public API's type check (tools/typecheck.py): part of `make test`.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/python tools/typecheck.py

# The suite runs on TEST_WORKERS pytest-xdist workers, a test file (all of tests/spark) to a
# worker at a time (tests/conftest.py). tests/multinode runs a multi-node Ray cluster of its own
# (and a local-cluster Spark): a driver belongs to one Ray cluster, so it is a second pytest
# process (tests/conftest.py).
TEST_WORKERS ?= 2
test: lint $(STAMP) $(KAFKA_STAMP) browser bytecode
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
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
	$(VENV)/bin/python bench/large_answers.py
	$(VENV)/bin/python bench/catalog.py
	$(VENV)/bin/python bench/assignors.py
	$(VENV)/bin/python bench/scale.py
	$(VENV)/bin/python bench/rebalance.py

clean:
	rm -rf $(VENV) build *.egg-info
