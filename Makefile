# Two entry points for a fresh machine with Python >= 3.10 and pip: `make demo` and `make test`.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.runtime

.PHONY: demo test test-fast test-tools browser-tools test-pythons check lint typecheck benchmark clean docs docs-pictures

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The product and its rehearsals (rehearsal/, the second distribution: the fake cloud, the fake Kubernetes and the
# simulation doubles the tests use), both editable.
$(STAMP): $(BIN)/python pyproject.toml rehearsal/pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,dev,docs]" -e ./rehearsal
	touch $(STAMP)

# The demo needs the runtime only (a few dependencies, seconds to install); the test and dev tools come with
# `make test`.
$(RUNTIME_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME_STAMP)

demo: $(RUNTIME_STAMP)
	$(BIN)/python examples/demo.py

# Programs the tests drive besides Python: tmux (scaler_top in a real terminal), chromium and chromedriver (the
# dashboard in a real browser; Debian packages chromium and chromium-driver), nft (the fake cloud's isolated
# network, `scaler_fake_cloud --isolate-network`; Debian package nftables), munged, slurmctld, slurmd and sbatch (a
# real Slurm on this host for the Slurm manager's tests, which start its daemons themselves: Debian packages munge,
# slurmctld, slurmd and slurm-client; a /usr/sbin/policy-rc.d exiting 101, made for the install when there is none,
# keeps apt from starting the services), slirp4netns (a documentation page's network of its own, so the pages at the
# docs' ports run side by side: tests/docs/own_network.py). Installed with apt-get when missing and possible;
# otherwise those tests skip, saying why (the pages at the docs' ports then run one after another).
TEST_PROGRAMS ?= tmux chromium chromedriver nft munged slurmctld slurmd sbatch slirp4netns
test-tools:
	@missing=""; for program in $(TEST_PROGRAMS); do command -v $$program >/dev/null 2>&1 || missing="$$missing $$program"; done; \
	missing=$$(echo "$$missing" | sed 's/chromedriver/chromium-driver/; s/nft/nftables/; s/munged/munge/; s/sbatch/slurm-client/'); \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing for the tests"; \
		policy=""; if [ ! -e /usr/sbin/policy-rc.d ] && [ -w /usr/sbin ]; then \
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy=made; fi; \
		(apt-get install -y -q $$missing >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $$missing >/dev/null 2>&1)) \
			|| echo "could not install$$missing: the tests that need them will skip"; \
		if [ -n "$$policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; \
	fi

# The browser client's page test (tests/integration/test_browser_page.py): Pyodide and tweetnacl in a cache
# (`docs/try_page.py fetch`: the npm packages, checked against the digests pinned in scaler/browser/served_page.py;
# the page's wheels are packed from what is installed when it is served; nothing is fetched at test time), and an
# environment of the page's Python (3.13) for the cluster it connects to, since a scheduler
# refuses a client of another Python minor: .venv-3.13, the one test-pythons uses too. Without npm or a Python 3.13
# (pyenv's, or python3.13 on PATH) that test skips, saying why.
BROWSER_PYTHON ?= 3.13
browser-tools: $(STAMP)
	@if command -v npm >/dev/null 2>&1; then $(BIN)/python docs/try_page.py fetch >/dev/null || echo "browser-tools: could not fetch Pyodide: the browser page test will skip"; \
	else echo "browser-tools: no npm here: the browser page test will skip"; fi
	@interpreter=""; \
	for candidate in $$(ls -d $$HOME/.pyenv/versions/$(BROWSER_PYTHON).*/bin/python 2>/dev/null) $$(command -v python$(BROWSER_PYTHON)); do \
		if $$candidate -c "import venv" >/dev/null 2>&1; then interpreter=$$candidate; fi; \
	done; \
	venv=.venv-$(BROWSER_PYTHON); \
	if [ -z "$$interpreter" ]; then echo "browser-tools: no Python $(BROWSER_PYTHON) here: the browser page test will skip"; \
	elif [ ! -f $$venv/.browser-cluster ] || [ pyproject.toml -nt $$venv/.browser-cluster ]; then \
		{ [ -x $$venv/bin/python ] || $$interpreter -m venv $$venv; } && $$venv/bin/python -m pip install --quiet -e ".[websocket]" && touch $$venv/.browser-cluster \
			|| echo "browser-tools: could not install scaler for Python $(BROWSER_PYTHON): the browser page test will skip"; \
	fi

# Six test processes on a 2-core machine: most tests wait on real processes, sockets, timeouts and fake-cloud boots
# (with two, the load average of a whole run stayed near 1; three took 19 minutes; quiet runs with four and five
# kept the cores 68% and 78% busy: 1,075 CPU-s in 795 s, 1,126 in 725 s), so more processes keep the cores busy; the
# longest tests start first (tests/ordering.py) and each process takes the next test when it frees up
# (`--dist loadgroup`: one test at a time, except that a module marked xdist_group, whose module fixtures are costly,
# runs whole in one process; xdist's default hands out blocks of consecutive tests, the longest all to one process).
# TEST_PROCESSES=0 runs the suite in this process. The 25 slowest tests are listed at the end (where the time goes).
TEST_PROCESSES ?= 6
# The container engine of the one test that runs ECS tasks as containers of the worker image (root and apt-get
# only, otherwise that test skips): docker/test-engine.sh starts Debian's dockerd with no bridge and no iptables
# rules before the suite, and stops it after (only if it started it).
test: $(STAMP) test-tools browser-tools
	@sh docker/test-engine.sh start
	@status=0; $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder --durations=25 || status=$$?; \
		sh docker/test-engine.sh stop; exit $$status

# The inner loop: the pure tiers (unit and simulation: no processes, no sockets) and the pure tests of the other
# tiers (what the documentation and conformance tiers check of their own tables), in two processes (they use the CPU
# the whole time: two cores, two processes). Every test not marked `integration` in these folders.
FAST_TESTS ?= tests/unit tests/simulation tests/docs tests/conformance/test_exclusions.py
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 -m "not integration" $(FAST_TESTS)

lint: $(STAMP)
	$(BIN)/ruff check scaler rehearsal tests benchmarks examples docs/*.py
	$(BIN)/ruff format --check scaler rehearsal tests benchmarks examples docs/*.py
	$(BIN)/lint-imports
	$(BIN)/python tools/scheduler_floors.py >/dev/null || $(BIN)/python tools/scheduler_floors.py

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

# The pure tiers (`make test-fast`'s tests) on the oldest and newest Python we support, each in its own venv. An
# interpreter that is not on this machine is reported and skipped.
PURE_PYTHONS ?= 3.10 3.13
test-pythons:
	@for version in $(PURE_PYTHONS); do \
		interpreter=""; \
		for candidate in $$(ls -d $$HOME/.pyenv/versions/$$version.*/bin/python 2>/dev/null) $$(command -v python$$version); do \
			if $$candidate -c "import venv" >/dev/null 2>&1; then interpreter=$$candidate; fi; \
		done; \
		if [ -z "$$interpreter" ]; then echo "test-pythons: Python $$version not found on this machine: skipped"; continue; fi; \
		venv=.venv-$$version; \
		[ -x $$venv/bin/python ] || $$interpreter -m venv $$venv || exit 1; \
		$$venv/bin/python -m pip install --quiet -e ".[test]" -e ./rehearsal || exit 1; \
		echo "pure tiers on $$($$venv/bin/python --version)"; \
		$$venv/bin/python -m pytest -q -p no:cacheprovider -n 2 -m "not integration" $(FAST_TESTS) || exit 1; \
	done

# The side-by-side benchmark (docs/performance.md): `make benchmark ARGS="--systems ours,dask --workloads W1,W3"`.
benchmark: $(STAMP)
	$(BIN)/python benchmarks/run.py $(ARGS)

clean:
	rm -rf $(VENV) .venv-3.* build *.egg-info rehearsal/build rehearsal/*.egg-info

# The documentation site (the docs extra): the pages of docs/ with Sphinx and MyST, navigation from docs/index.md,
# the API reference from the docstrings with pdoc, in build/docs/html (open index.html); any warning fails it
# (docs/build_site.py).
docs: $(STAMP)
	$(BIN)/python docs/build_site.py build/docs/html

# The user guide's architecture picture and the scheduler's floors (docs/architecture.md), from their Graphviz
# sources (needs `dot`: apt-get install graphviz).
docs-pictures:
	dot -Tsvg docs/guide/architecture.dot -o docs/guide/architecture.svg
	dot -Tsvg docs/images/scheduler_floors.dot -o docs/images/scheduler_floors.svg
