# Set-up commands, all working on a fresh machine:
#   make demo       create .venv, install what the demo needs only (torch and the `demo` extra: Lightning,
#                   matplotlib, DuckDB), replicate the bundled Lightning example, ask in rounds whether a
#                   lower learning rate is worse (--until-decided), and print the report
#   make test       create .venv, install (with the mlflow/tensorboard/wandb extras; as root also Debian's
#                   Chromium, for the browser test of the HTML report), run tests/ (tests/trackers starts
#                   a real MLflow server on loopback) and the Keras end-to-end suite (TensorFlow and torch)
#                   and integrations/real_projects (small Hydra, LightningCLI, Keras and plain scripts, a
#                   nanoGPT-style configurator writing fixed paths, scripts that switch determinism on
#                   themselves, a standalone DeviateCallback script; replicated through command mode,
#                   `deviate-replicate -- python train.py ...`)
#   make test-fast  the same install, tests/ without the tests marked slow (each 3 s or more: replicas and
#                   audits as subprocesses, servers) and without the Keras end-to-end and real-project suites
#   make screenshot render the demo study's HTML report and save docs/report.png (the README's picture; adds
#                   playwright to the demo's install, and Debian's Chromium as root when missing)
#   make test-jax   also install JAX (CPU build) and run the Keras end-to-end suite on the JAX backend
#   make docs       install the `docs` extra (MkDocs, Material, mkdocstrings) into .venv and build the site from
#                   docs/ and mkdocs.yml with `mkdocs build --strict` (a broken link or reference fails) into site/
#   make test-integrations   install the slurm/ray extras (and, as root, Debian's Slurm + MariaDB packages when
#                   missing), then run integrations/slurm (a real single-node Slurm with slurmdbd, started
#                   and stopped by the suite) and integrations/ray (a local Ray cluster on loopback)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.installed-demo-stamp
SHOT_STAMP := $(VENV)/.installed-screenshot-stamp
JAX_STAMP := $(VENV)/.installed-jax-stamp
CLUSTER_STAMP := $(VENV)/.installed-cluster-stamp
DOCS_STAMP := $(VENV)/.installed-docs-stamp
SLURM_DEBS := munge slurmctld slurmd slurm-client slurmdbd mariadb-server
BROWSER_DEBS := chromium
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

.PHONY: docs demo test test-fast test-jax test-slurm test-ray test-integrations slurm-packages browser-packages screenshot lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0"
	$(PIP_INSTALL) -e ".[lightning,keras,transformers,report,mlflow,tensorboard,wandb,dev]" "$(TF_PACKAGE)"
	touch $(STAMP)

# The demo's own install: torch and the `demo` extra only (a venv that already has the full install gets
# nothing new from it).
$(DEMO_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0"
	$(PIP_INSTALL) -e ".[demo]"
	touch $(DEMO_STAMP)

# The screenshot's driver of Debian's Chromium, on top of the demo's install
$(SHOT_STAMP): $(DEMO_STAMP)
	$(PIP_INSTALL) playwright
	touch $(SHOT_STAMP)

# The docs' own install: the package (its CLI parsers render the CLI reference) and the `docs` extra, no torch
$(DOCS_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e ".[docs]"
	touch $(DOCS_STAMP)

$(JAX_STAMP): $(STAMP)
	$(PIP_INSTALL) "$(JAX_PACKAGE)"
	touch $(JAX_STAMP)

$(CLUSTER_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[slurm,ray]"
	touch $(CLUSTER_STAMP)

# Debian's Slurm and MariaDB, only when missing (apt-get as root; integrations/slurm/start.sh checks again)
slurm-packages:
	@missing=$$(for p in $(SLURM_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; apt-get update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
	fi

# Debian's Chromium for the browser test of the HTML report, only when missing (apt-get as root; elsewhere the
# test says it was skipped and why)
browser-packages:
	@missing=$$(for p in $(BROWSER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
		echo "installing:" $$missing; apt-get update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
	fi

demo: $(DEMO_STAMP)
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main -n 4 --variant algo+impl \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main -n 3 --variant control \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp
	$(BIN)/deviate-replicate --trainer examples/lightning_mlp.py:main_low_lr -n 3 --variant algo+impl \
		--parallel 2 --out $(DEMO_OUT) --experiment mlp_low_lr --until-decided --against experiment=mlp \
		--against variant=algo+impl --metric val_acc --max-runs 10
	$(BIN)/deviate report $(DEMO_OUT)

test: $(STAMP) browser-packages
	DEVIATE_KERAS_BACKENDS=tensorflow,torch $(BIN)/python -m pytest tests integrations/keras integrations/real_projects

test-fast: $(STAMP) browser-packages
	$(BIN)/python -m pytest tests -m "not slow"

screenshot: $(SHOT_STAMP) browser-packages
	test -d $(DEMO_OUT) || $(MAKE) demo
	$(BIN)/deviate report $(DEMO_OUT) --format html -o $(DEMO_OUT)/report.html
	$(BIN)/python tests/report/browser.py $(DEMO_OUT)/report.html docs/report.png

# The site: README.md as its home page, the guides of docs/, the CLI reference from the parsers and the API
# reference from the docstrings (docs/gen_pages.py, mkdocs.yml), into site/
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test-jax: $(JAX_STAMP)
	DEVIATE_KERAS_BACKENDS=jax $(BIN)/python -m pytest integrations/keras

test-slurm: $(CLUSTER_STAMP) slurm-packages
	$(BIN)/python -m pytest integrations/slurm

# Ray stays on loopback and reports nothing home; the suite stops only the processes it started.
test-ray: $(CLUSTER_STAMP)
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_USAGE_STATS_ENABLED=0 $(BIN)/python -m pytest integrations/ray

test-integrations: test-slurm test-ray

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy deviate_cb

clean:
	rm -rf $(VENV) $(DEMO_OUT) deviate_runs .pytest_cache site
