# Everything runs from a project-local virtualenv made with the machine's python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-large lint demo gameday install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# mypy reads its packages and strictness from pyproject.toml ([tool.mypy]); its cache is .mypy_cache.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# Three workers on 2 cores, a test file each at a time (a file's tests share its fixtures and order):
# most of the suite's time is sandboxes waiting on their pollers, schedules and alarm clocks (with
# two workers the CPU was busy about half the wall time), so a third overlaps its waits with the
# others' work. Measured on an idle 2-core machine (pytest's own time; CI adds the install):
# 2 workers 828 s before this change's two test cuts (about 110 s of one worker's time),
# 3 workers 561 s with them; with two busy loops beside it (and other tests run by hand), 914 s.
# No test depends on a handler finishing within a scaled-down timeout, so a busier CPU makes the
# waits longer, never a result different.
# Files go out in collection order (--no-loadscope-reorder): xdist's default hands out the files
# with the most tests first, which leaves the one-test files -- here the sandbox tests of a minute
# each -- for the end, where one worker runs them while the others idle. In collection order the
# sandbox-heavy directories (browser, cli, e2e) start first and tests/unit's small files fill the end.
TEST_WORKERS ?= 3

test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

# The 2,000-file folder (about 8 minutes on 2 cores): kept out of the default suite.
test-large: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m large

demo: $(STAMP)
	$(BIN)/pipeops demo

# The full game day (every fault of the catalog; under 8 minutes on 2 cores): records the result
# in docs/GAMEDAY.json and regenerates docs/GAMEDAY.md; the timelines go to gameday.html.
# The short form runs in `make test` (tests/e2e/test_gameday_short.py).
gameday: $(STAMP)
	$(BIN)/pipeops gameday --record --report gameday.html
	$(BIN)/pipeops gameday --slo --record --report gameday-slo.html

clean:
	rm -rf $(VENV) build *.egg-info

# ------------------------------------------------------------------ Lambda artifacts (sam build)
# Every function in template.yaml has `Metadata: BuildMethod: makefile`: `sam build` runs
# `make build-<LogicalId> ARTIFACTS_DIR=<.aws-sam/build/<LogicalId>>`, and what lands in
# ARTIFACTS_DIR is exactly what the function ships: its runtime package(s) and the Lambda
# requirements, never tests/, bench/, sandbox/, pipeops/ or samples/ (tests/unit/test_packaging.py).
#
# The requirements are installed as wheels for the Lambda runtime and architecture of
# template.yaml's Globals (Runtime: python3.12, Architectures: arm64; a test keeps them equal),
# not for the Python running pip: any python3 >= 3.11 with pip builds them, without Docker.
# boto3/botocore are not installed: the Lambda runtime provides them (requirements.txt).
# SKIP_DEPS=1 copies the packages only (the tests do, to stay fast and offline).
LAMBDA_PYTHON_VERSION := 3.12
LAMBDA_PLATFORM := manylinux2014_aarch64
LAMBDA_REQUIREMENTS := requirements.txt
SKIP_DEPS ?=

# Bytecode. /var/task is read-only, so an artifact of sources only is compiled again at every cold
# start (the router: about +20 ms of project code, more with its dependencies). When the build has
# the runtime's Python (LAMBDA_BYTECODE_PYTHON: python3.12 on PATH, or set it), the artifact ships
# bytecode for it, hash-based and unchecked (Lambda never edits a source under its .pyc). Without
# it the artifact ships sources only and works the same, only slower to start.
LAMBDA_BYTECODE_PYTHON ?= $(shell python$(LAMBDA_PYTHON_VERSION) -c 'import sys; print(sys.executable)' 2>/dev/null)

# $(call compile-artifact): compile everything in ARTIFACTS_DIR for the runtime, if we can.
define compile-artifact
	$(if $(strip $(LAMBDA_BYTECODE_PYTHON)),"$(LAMBDA_BYTECODE_PYTHON)" -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "$(LAMBDA_PYTHON_VERSION)".split("."))))' || { echo "LAMBDA_BYTECODE_PYTHON is not Python $(LAMBDA_PYTHON_VERSION)" >&2; exit 2; }
	"$(LAMBDA_BYTECODE_PYTHON)" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$(ARTIFACTS_DIR)",@echo "no python$(LAMBDA_PYTHON_VERSION) for bytecode: $(ARTIFACTS_DIR) ships sources only")
endef

# Functions whose handler is in pipeline/handlers/, and the reconciler (monitors.reconcile.handler,
# which imports pipeline): only monitors/__init__.py and monitors/reconcile/ of the monitors package.
PIPELINE_FUNCTIONS := IngestFunction RouterFunction BatchTriggerFunction WorkflowTrackerFunction \
	DetectFunction GenerateSyntheticFunction RedactFunction FinalizeFunction
RECONCILER_FUNCTIONS := ReconcilerFunction
# The runbook Lambda (runbooks.automation.handler, invoked by the SSM Automation documents): the
# runbook automation, the stack's names (stack/resources.py) and the monitors it uses.
RUNBOOK_FUNCTIONS := RunbookFunction
LAMBDA_FUNCTIONS := $(PIPELINE_FUNCTIONS) $(RECONCILER_FUNCTIONS) $(RUNBOOK_FUNCTIONS)

.PHONY: $(addprefix build-,$(LAMBDA_FUNCTIONS)) lambda-requirements

# $(call copy-tree,<directory>): copy a source tree into ARTIFACTS_DIR, bytecode caches left out.
define copy-tree
	mkdir -p "$(ARTIFACTS_DIR)/$(1)"
	cp -R $(1)/. "$(ARTIFACTS_DIR)/$(1)/"
	find "$(ARTIFACTS_DIR)/$(1)" -depth -name __pycache__ -type d -exec rm -rf {} +
endef

$(addprefix build-,$(PIPELINE_FUNCTIONS)): lambda-requirements
	$(call copy-tree,pipeline)
	$(call compile-artifact)

$(addprefix build-,$(RECONCILER_FUNCTIONS)): lambda-requirements
	$(call copy-tree,pipeline)
	$(call copy-tree,monitors/reconcile)
	cp monitors/__init__.py "$(ARTIFACTS_DIR)/monitors/__init__.py"
	$(call compile-artifact)

$(addprefix build-,$(RUNBOOK_FUNCTIONS)): lambda-requirements
	$(call copy-tree,pipeline)
	$(call copy-tree,monitors/reconcile)
	cp monitors/__init__.py monitors/failures.py "$(ARTIFACTS_DIR)/monitors/"
	$(call copy-tree,runbooks/automation)
	cp runbooks/__init__.py runbooks/catalog.py "$(ARTIFACTS_DIR)/runbooks/"
	mkdir -p "$(ARTIFACTS_DIR)/stack"
	cp stack/__init__.py stack/resources.py "$(ARTIFACTS_DIR)/stack/"
	$(call compile-artifact)

lambda-requirements:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set (sam build sets it)" >&2; exit 2; }
	mkdir -p "$(ARTIFACTS_DIR)"
ifeq ($(SKIP_DEPS),)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile \
		--requirement $(LAMBDA_REQUIREMENTS) --target "$(ARTIFACTS_DIR)" \
		--platform $(LAMBDA_PLATFORM) --implementation cp --python-version $(LAMBDA_PYTHON_VERSION) \
		--only-binary=:all:
	rm -rf "$(ARTIFACTS_DIR)/bin"  # console scripts of the dependencies: not used by a function
else
	@echo "SKIP_DEPS set: $(LAMBDA_REQUIREMENTS) not installed into $(ARTIFACTS_DIR)"
endif
