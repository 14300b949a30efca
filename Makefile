# The course's two commands: `make lab` (start the course) and `make test` (run every check).
# Both create .venv on first use (about 4 minutes) and reuse it afterwards.

PYTHON  ?= python3
VENV    ?= .venv
# Which optional dependencies to install: `cpu` (default) or `gpu` frameworks, plus JupyterLab and
# the developer tools, and what `make site` builds the course's web site with. A GPU user runs e.g.
# `make lab EXTRAS=gpu,lab,dev`. (`hub`: JupyterHub and nbgitpuller, for `make hub` and its test.)
EXTRAS  ?= cpu,lab,dev,site,hub
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PORT    ?= 8888
IP      ?= 127.0.0.1
# Parallel pytest workers (each notebook stays in one worker: --dist loadfile).
WORKERS ?= 2
NBVAL   := --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with nbval_sanitize.cfg
KERNEL  := graph-course
# The edition `make lab` opens and `make grade` grades: COURSE_LANG=zh for the Chinese one (zh/).
# (Not LANG, which is the locale variable of every shell.)
COURSE_LANG ?= en
EDITION := $(if $(filter zh zh-CN zh_CN,$(COURSE_LANG)),zh/,)

.PHONY: venv lab test unit notebooks lint execute exercises kernel clean grade audit release site
.PHONY: env hub

venv: $(STAMP)

# Rebuilt when pyproject.toml changes or when EXTRAS asks for something else.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@echo "$(EXTRAS)" > $@

# The course's kernel, and JupyterLab settings for a course (no news or update checks: the course
# must work on a closed network).
kernel: venv
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) \
		--display-name "Python 3 (graph course)" > /dev/null
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	@cp jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json

# Start the course. JupyterLab prints its URL with the access token; see README for remote machines.
# (Containers often run as root, which JupyterLab refuses unless told.)
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
lab: kernel
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --ip=$(IP) --port=$(PORT) $(LAB_ARGS) \
		$(EDITION)notebooks/00_setup.ipynb

# Every check: lint, exercises in sync with solutions, unit tests and lesson notebooks (outputs
# compared). The solutions notebooks run in tests/test_shortcuts.py, the shortcut audit: each
# runs top to bottom in one kernel, earns full marks, and every exercise's shortcut answers
# earn at most half its points (tests/fixtures/shortcuts). Every run ends with the 25 slowest
# tests (--durations=25): where the time goes.
test: venv
	$(BIN)/ruff check .
	$(BIN)/course-build-exercises --check
	$(BIN)/pytest -n $(WORKERS) --dist loadfile --durations=25 --nbval $(NBVAL) tests notebooks

unit: venv
	$(BIN)/pytest -n $(WORKERS) tests

notebooks: venv
	$(BIN)/pytest -n $(WORKERS) --dist loadfile --nbval $(NBVAL) notebooks

lint: venv
	$(BIN)/ruff check .

# Re-execute the lessons in place so their committed outputs are current (NB=notebooks/03_*.ipynb
# for one).
NB ?= notebooks/*.ipynb
execute: kernel
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=300 --ExecutePreprocessor.kernel_name=python3 \
		--ExecutePreprocessor.record_timing=False $(NB)

# Regenerate exercises/ from solutions/.
exercises: venv
	$(BIN)/course-build-exercises

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# Grade your exercises: `make grade NB=exercises/01_computation_graphs.ipynb` (default: all of them).
grade: venv
	$(BIN)/course-grade $(if $(filter command line,$(origin NB)),$(NB),$(EDITION)exercises)

# The shortcut audit, as a table: `make audit NB=01_computation_graphs` (default: every notebook).
audit: venv
	$(BIN)/python -m course_utils.grading.audit $(if $(filter command line,$(origin NB)),$(basename $(notdir $(NB))),--all)

# What learners get in a graded class: `make release DIR=../class-2025` (no solutions, no hidden
# checks, no tests; the package's answers withheld), `LESSONS=03 SOLUTIONS=01,02` to add lesson 03
# and ship the package's answers to the exercises of 01 and 02, which have closed.
release: venv
	$(BIN)/course-build-exercises --release $(DIR) $(if $(LESSONS),--lessons $(LESSONS)) \
		$(if $(SOLUTIONS),--solutions $(SOLUTIONS))

# The course's web site, both editions, from the executed notebooks (nothing is run), offline:
# Sphinx + myst-nb (the `site` extra) and MathJax 3 from npm, served by the site itself. Open
# build/site/index.html. (The Chinese notebooks come from `python -m course_utils.editions build`.)
MATHJAX_VERSION := 3.2.2
MATHJAX := build/mathjax/node_modules/mathjax/es5
$(MATHJAX)/tex-mml-chtml.js:
	@command -v npm > /dev/null || { echo "make site needs npm to install MathJax (apt-get install npm)"; exit 1; }
	npm install --prefix build/mathjax --no-save --no-audit --no-fund --no-package-lock mathjax@$(MATHJAX_VERSION)

site: venv $(MATHJAX)/tex-mml-chtml.js
	@$(BIN)/python -c "import myst_nb, sphinx_book_theme, jieba" 2> /dev/null || $(BIN)/python -m pip install --quiet -e ".[site]"
	$(BIN)/python site/build.py --mathjax $(MATHJAX) --out build/site

# A class (README, "Teaching a class"). `make env PREFIX=/opt/graph-course` (as root for /opt):
# one read-only environment that every user of a machine or a JupyterHub runs the course from,
# with the CPU builds of the frameworks, JupyterLab, the kernel, JupyterHub's single-user server
# and nbgitpuller, and the course's package installed (not editable); no developer tools.
# ENV_PIP passes pip options, e.g. "--extra-index-url https://download.pytorch.org/whl/cpu" for
# PyTorch's CPU wheel where PyPI's Linux wheel is the CUDA build.
PREFIX     ?= /opt/graph-course
ENV_EXTRAS ?= cpu,lab,hub
ENV_PIP    ?=
env:
	$(PYTHON) -m venv --clear $(PREFIX)
	$(PREFIX)/bin/python -m pip install --quiet --upgrade pip
	$(PREFIX)/bin/python -m pip install --quiet $(ENV_PIP) ".[$(ENV_EXTRAS)]"
	$(PREFIX)/bin/python -m ipykernel install --prefix $(PREFIX) --name $(KERNEL) \
		--display-name "Python 3 (graph course)" > /dev/null
	@mkdir -p $(PREFIX)/share/jupyter/lab/settings
	@cp jupyter/overrides.json $(PREFIX)/share/jupyter/lab/settings/overrides.json
	@$(PREFIX)/bin/python -m compileall -q -j 0 $(PREFIX)/lib > /dev/null || true
	chmod -R a+rX,go-w $(PREFIX)
	@du -sh $(PREFIX) $(wildcard $(VENV))

# JupyterHub for a class on this machine, in the foreground (Ctrl-C stops it and every server it
# started): deploy/hub/README.md. The learners' kernel is the shared environment (make env).
HUB_PORT ?= 8000
HUB_PROXY := deploy/hub/node_modules/.bin/configurable-http-proxy
$(HUB_PROXY): deploy/hub/package.json
	@command -v npm > /dev/null || { echo "make hub needs npm for configurable-http-proxy (apt-get install npm)"; exit 1; }
	npm install --prefix deploy/hub --no-audit --no-fund --loglevel=error
	@touch $@
hub: venv $(HUB_PROXY)
	@test -x $(PREFIX)/bin/jupyterhub-singleuser || { echo "no shared environment in $(PREFIX): run make env PREFIX=$(PREFIX) first"; exit 1; }
	COURSE_ENV=$(PREFIX) HUB_PORT=$(HUB_PORT) $(BIN)/python deploy/hub/run.py
