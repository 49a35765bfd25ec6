# Everything runs from a project-local virtualenv made with the machine's python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-large lint demo install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15

# The 2,000-file folder (about 8 minutes on 2 cores): kept out of the default suite.
test-large: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m large

demo: $(STAMP)
	$(BIN)/pipeops demo

clean:
	rm -rf $(VENV) build *.egg-info
