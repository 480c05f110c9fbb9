# Set-up commands, all working on a fresh machine:
#   make demo       create .venv, install, replicate the bundled Lightning example and print the report
#   make test       create .venv, install, run tests/ and the Keras end-to-end suite (TensorFlow and torch)
#   make test-jax   also install JAX (CPU build) and run the Keras end-to-end suite on the JAX backend
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
JAX_STAMP := $(VENV)/.installed-jax-stamp
# torch is pinned here only (constraints.txt), never in the package: GPU users bring their own build.
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check -c constraints.txt
# TensorFlow for the Keras tests: the CPU-only wheel on Linux (plain `tensorflow`, what the package's
# `tensorflow` extra asks for so that GPU users get CUDA support, is a 570 MB download here); JAX's default
# wheel is its CPU build.
ifeq ($(shell uname -s),Linux)
TF_PACKAGE ?= tensorflow-cpu==2.21.0
else
TF_PACKAGE ?= tensorflow==2.21.0
endif
JAX_PACKAGE ?= jax==0.10.2
DEMO_OUT ?= demo_runs
LINT_PATHS := deviate_cb tests examples benchmarks integrations

.PHONY: demo test test-jax lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0"
	$(PIP_INSTALL) -e ".[lightning,keras,dev]" "duckdb>=1.0" "$(TF_PACKAGE)"
	touch $(STAMP)

$(JAX_STAMP): $(STAMP)
	$(PIP_INSTALL) "$(JAX_PACKAGE)"
	touch $(JAX_STAMP)

demo: $(STAMP)
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main -n 4 --variant algo+impl \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main -n 3 --variant control \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp
	$(BIN)/deviate report $(DEMO_OUT)

test: $(STAMP)
	DEVIATE_KERAS_BACKENDS=tensorflow,torch $(BIN)/python -m pytest tests integrations/keras

test-jax: $(JAX_STAMP)
	DEVIATE_KERAS_BACKENDS=jax $(BIN)/python -m pytest integrations/keras

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

clean:
	rm -rf $(VENV) $(DEMO_OUT) deviate_runs .pytest_cache
