# The course's commands. `make lab` and `make test` work on a fresh clone with nothing installed:
# both create the virtual environment .venv (if missing) and install the course into it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two installs into the same .venv: the learner's (the course and JupyterLab: make lab,
# make lab-student, make student) and the instructor's (every extra: tests, grading, hub,
# cluster; make test and the rest). The learner's holds no instructor tool.
STAMP := $(VENV)/.installed
LAB_STAMP := $(VENV)/.installed-lab
LAB_EXTRAS := lab
ALL_EXTRAS := lab,dev,grading,class,cluster
# Every target runs `python -m course_tools ...`, which also works without make (README, Install).
# Unit tests and notebooks run in parallel on this many workers (notebooks stay whole: loadscope).
WORKERS ?= 2
# TORCH=cpu installs torch from PyTorch's CPU wheel index first (Linux without a CUDA GPU: about
# 0.2 GB instead of several GB of CUDA wheels); TORCH=cu126 etc. picks that CUDA build.
TORCH ?=
# Where the installs download from, one variable each (README.zh-CN.md, "安装"): PIP_INDEX_URL=URL
# a PyPI mirror for every package; TORCH_INDEX=URL the wheel index torch comes from (default: PyTorch's
# index for TORCH=cpu/cu126/...; set it alone to take torch from a mirror of that index).
PIP_INDEX_URL ?=
TORCH_INDEX ?= $(if $(TORCH),https://download.pytorch.org/whl/$(TORCH))
PIP_INDEX := $(if $(PIP_INDEX_URL),--index-url $(PIP_INDEX_URL))
# The notebooks' language for `make lab` and `make lab-student`: LANG=zh-CN or LANG=zh-TW on the
# command line (your locale's LANG is ignored), or COURSE_LANG=zh-Hans / zh-Hant / en.
COURSE_LANG ?= $(if $(filter command line,$(origin LANG)),$(LANG))
LANG_OPTION := $(if $(COURSE_LANG), --lang $(COURSE_LANG))
TORCH_SPEC := $(shell grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"')
# STUDENT=1: `make lab` opens your copies in student/ (the same as `make lab-student`).
STUDENT ?=

.PHONY: help venv lab lab-student test test-system test-all quick system-deps unit nbval lint notebooks student site bench clean

help:
	@echo "make lab          open JupyterLab on notebooks/ (creates .venv on first use: the learner's"
	@echo "                  install, the course + JupyterLab; make test adds the instructor's tools)"
	@echo "make lab-student  open your own copies in student/ (solutions stripped)"
	@echo "make test         lint + unit tests + every notebook under nbval (about 5 minutes)"
	@echo "make test-system  the system tier: sandboxed grading, nbgrader, the browser, the hub,"
	@echo "                  the wheel in a fresh environment (needs make system-deps; CI runs it)"
	@echo "make test-all     make test, then make test-system (what CI runs)"
	@echo "make quick        the edit-test loop: lint + the fast unit tests (under a minute)"
	@echo "make system-deps  install the packages pip cannot (chromium, fonts-noto-cjk,"
	@echo "                  bubblewrap; npm's hub proxy; sudo when not root): without them the"
	@echo "                  tests that need them skip, and make test names them"
	@echo "make notebooks    re-execute every notebook in place (refresh the stored outputs;"
	@echo "                  REMEASURE=1 also stores new time plots)"
	@echo "make student      write student versions (solutions stripped) to student/ (LANG=zh-CN:"
	@echo "                  student/zh-Hans/), OVERWRITING your copies there (make lab-student keeps them)"
	@echo "make site         static HTML of the executed notebooks in build/site/"
	@echo "make bench        attention, training and decoding speed benchmarks (not part of the tests)"
	@echo "options: TORCH=cpu (CPU-only torch on Linux), WORKERS=N, STUDENT=1,"
	@echo "         LANG=zh-CN / LANG=zh-TW (lab and student copies in Chinese),"
	@echo "         PIP_INDEX_URL=URL (a PyPI mirror), TORCH_INDEX=URL (torch's wheel index)"

# The learner's install: the course, torch and JupyterLab (README, Install: its measured size).
$(LAB_STAMP): pyproject.toml
	@echo "== Installing the course into $(VENV) (first time only: 2-5 minutes, about 1.3 GB on"
	@echo "== disk with the CPU build of torch). On Linux, PyPI's torch is the CUDA build: about"
	@echo "== 2.7 GB more to download, unless you run with TORCH=cpu (see README, Install)."
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_INDEX) --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install '$(TORCH_SPEC)' --index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install $(PIP_INDEX) --progress-bar on -e '.[$(LAB_EXTRAS)]'
	@touch $(LAB_STAMP)
	@echo "== Installed. Next: make lab-student (your copies) or make lab (the instructor's notebooks)."

# The instructor's install: the learner's plus the tests, grading, the hub and the cluster.
$(STAMP): pyproject.toml
	@echo "== Installing the course and the instructor's tools into $(VENV) (tests, nbgrader,"
	@echo "== JupyterHub, Dask; first time only: 3-7 minutes, about 1.9 GB with the CPU torch)."
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_INDEX) --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install '$(TORCH_SPEC)' --index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install $(PIP_INDEX) --progress-bar on -e '.[$(ALL_EXTRAS)]'
	@touch $(STAMP) $(LAB_STAMP)

venv: $(LAB_STAMP)

lab: $(LAB_STAMP)
	$(BIN)/python -m course_tools lab $(if $(STUDENT),--student)$(LANG_OPTION)

lab-student: $(LAB_STAMP)
	$(BIN)/python -m course_tools lab --student$(LANG_OPTION)

# lint, then the unit tests (outside the system tier) and the notebooks in one pytest run, so that
# the two workers stay busy (python -m course_tools test; `make unit nbval` runs them one by one)
test: $(STAMP)
	$(BIN)/python -m course_tools test --workers $(WORKERS)

# The system tier (the tests marked system, tests/conftest.py): about 20 minutes on 2 cores; .ci/run runs it
# after make test. Its tests need the system packages (make system-deps) and skip without them.
test-system: $(STAMP)
	$(BIN)/python -m course_tools test system --workers $(WORKERS)

test-all: test test-system

# The system packages the tests use but pip cannot install: Chromium (the browser tests), a CJK
# font (Chinese in plots) and bubblewrap (the grading sandbox). .ci/run runs this, then make test;
# without them the tests that need them skip, each naming its package (tests/conftest.py).
SYSTEM_PACKAGES := chromium fonts-noto-cjk bubblewrap
# apt's lock is often held (unattended upgrades, another install): wait for it up to
# APT_LOCK_TIMEOUT seconds instead of failing at once. apt-get install waits by itself
# (DPkg::Lock::Timeout); apt-get update does not for its lists' lock, so it is retried.
APT_LOCK_TIMEOUT ?= 600
APT_GET = apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT)
APT_UPDATE = waited=0; until $$SUDO $(APT_GET) update -q; do \
	  [ $$waited -ge $(APT_LOCK_TIMEOUT) ] && exit 1; \
	  echo "== apt-get update failed (apt's lock held?): again in 10 s"; sleep 10; \
	  waited=$$((waited + 10)); done
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	fc-list 2>/dev/null | grep -q "Noto Sans CJK" || missing="$$missing fonts-noto-cjk"; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	if [ -n "$$missing" ]; then echo "== installing Debian's$$missing"; \
	  $(APT_UPDATE); DEBIAN_FRONTEND=noninteractive $$SUDO $(APT_GET) install -y -q $$missing \
	  || exit 1; fi; \
	if ! command -v configurable-http-proxy >/dev/null 2>&1; then \
	  echo "== installing npm's configurable-http-proxy (JupyterHub's proxy, for make hub)"; \
	  command -v npm >/dev/null 2>&1 || { $(APT_UPDATE); \
	    DEBIAN_FRONTEND=noninteractive $$SUDO $(APT_GET) install -y -q npm; } || exit 1; \
	  $$SUDO npm install -g configurable-http-proxy || exit 1; fi; \
	echo "== installed: $(SYSTEM_PACKAGES) configurable-http-proxy"

# The edit-test loop (under a minute on 2 cores): lint, then the unit tests not marked slow
# (training, notebook execution, sandboxed grading, the browser: marked slow in their files, tests/conftest.py).
quick: $(STAMP) lint
	$(BIN)/python -m pytest -q -m "not slow" -n $(WORKERS) tests

lint: $(STAMP)
	$(BIN)/python -m course_tools test lint

unit: $(STAMP)
	$(BIN)/python -m course_tools test unit --workers $(WORKERS)

nbval: $(STAMP)
	$(BIN)/python -m course_tools test nbval --workers $(WORKERS)

notebooks: $(STAMP)
	$(BIN)/python -m course_tools notebooks $(if $(filter 1,$(REMEASURE)),--remeasure)

site: $(STAMP)
	$(BIN)/python -m course_tools site

# Overwrites every copy in student/ (your work there is lost); make lab-student never does.
student: $(LAB_STAMP)
	$(BIN)/python -m course_tools student$(LANG_OPTION)

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_speed.py
	$(BIN)/python benchmarks/training_speed.py
	$(BIN)/python benchmarks/decoding_speed.py
	$(BIN)/python benchmarks/variants_speed.py --markdown --plot benchmarks/variants_speed.png
	$(BIN)/python benchmarks/long_range.py --plot benchmarks/long_range.png

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info  # student/ is kept: your work

# --- A class on JupyterHub (issue 30; README "A class on JupyterHub") ---------------------------
# CLASS=class.csv (username,language), HUBDIR=hub, HUB_PORT=8000; run as root (each student's
# server runs as that student's Unix user). CREATE_USERS=1 runs useradd for missing students.
# JupyterHub's proxy comes from npm: `npm install -g configurable-http-proxy` (make system-deps).
CLASS ?= class.csv
HUBDIR ?= hub
HUB_PORT ?= 8000
CREATE_USERS ?=

.PHONY: hub hub-collect wheel

hub: $(STAMP)
	$(BIN)/python -m course_tools hub $(CLASS) --dir $(HUBDIR) --port $(HUB_PORT)$(if $(filter 1,$(CREATE_USERS)), --create-users)

hub-collect: $(STAMP)
	$(BIN)/python -m course_tools hub collect $(HUBDIR) submitted

# the course as one installable file (notebooks, stored runs and READMEs inside): dist/*.whl
wheel: $(STAMP)
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation --wheel-dir dist .
