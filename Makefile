# Two set-up commands, both working on a fresh machine:
#   make demo   create .venv, install, replicate the bundled Lightning example and print the report
#   make test   create .venv, install, run the tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# torch is pinned here only (constraints.txt), never in the package: GPU users bring their own build.
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check -c constraints.txt
DEMO_OUT ?= demo_runs

.PHONY: demo test lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0"
	$(PIP_INSTALL) -e ".[lightning,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main -n 4 --variant algo+impl \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main -n 3 --variant control \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp
	$(BIN)/deviate report $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check deviate_cb tests examples benchmarks
	$(BIN)/ruff format --check deviate_cb tests examples benchmarks

clean:
	rm -rf $(VENV) $(DEMO_OUT) deviate_runs .pytest_cache
