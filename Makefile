# The course's commands. `make lab` and `make test` work on a fresh clone with nothing installed:
# both create the virtual environment .venv (if missing) and install the course into it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Every target runs `python -m lectures_lib ...`, which also works without make (README, Install).
# Unit tests and notebooks run in parallel on this many workers (notebooks stay whole: loadscope).
WORKERS ?= 2
# TORCH=cpu installs torch from PyTorch's CPU wheel index first (Linux without a CUDA GPU: about
# 0.2 GB instead of several GB of CUDA wheels); TORCH=cu126 etc. picks that CUDA build.
TORCH ?=
TORCH_SPEC := $(shell grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"')
# STUDENT=1: `make lab` opens your copies in student/ (the same as `make lab-student`).
STUDENT ?=

.PHONY: help venv lab lab-student test unit nbval lint notebooks student site bench clean

help:
	@echo "make lab          open JupyterLab on notebooks/ (creates .venv on first use)"
	@echo "make lab-student  open your own copies in student/ (solutions stripped)"
	@echo "make test         lint + unit tests (browser test included) + every notebook under nbval"
	@echo "make notebooks    re-execute every notebook in place (refresh the stored outputs;"
	@echo "                  REMEASURE=1 also stores new time plots)"
	@echo "make student      write student versions (solutions stripped) to student/"
	@echo "make site         static HTML of the executed notebooks in build/site/"
	@echo "make bench        attention, training and decoding speed benchmarks (not part of the tests)"
	@echo "options: TORCH=cpu (CPU-only torch on Linux), WORKERS=N, STUDENT=1"

$(STAMP): pyproject.toml
	@echo "== Installing the course into $(VENV) (first time only: 3-7 minutes, about 1.5 GB on"
	@echo "== disk with the CPU build of torch). On Linux, PyPI's torch is the CUDA build: about"
	@echo "== 2.7 GB more to download, unless you run with TORCH=cpu (see README, Install)."
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(if $(TORCH),$(BIN)/python -m pip install '$(TORCH_SPEC)' --index-url https://download.pytorch.org/whl/$(TORCH))
	$(BIN)/python -m pip install --progress-bar on -e '.[dev,grading]'
	@touch $(STAMP)
	@echo "== Installed. Next: make lab-student (your copies) or make lab (the instructor's notebooks)."

venv: $(STAMP)

lab: $(STAMP)
	$(BIN)/python -m lectures_lib lab $(if $(STUDENT),--student)

lab-student: $(STAMP)
	$(BIN)/python -m lectures_lib lab --student

test: $(STAMP) lint unit nbval

lint: $(STAMP)
	$(BIN)/python -m lectures_lib test lint

unit: $(STAMP)
	$(BIN)/python -m lectures_lib test unit --workers $(WORKERS)

nbval: $(STAMP)
	$(BIN)/python -m lectures_lib test nbval --workers $(WORKERS)

notebooks: $(STAMP)
	$(BIN)/python -m lectures_lib notebooks $(if $(filter 1,$(REMEASURE)),--remeasure)

site: $(STAMP)
	$(BIN)/python -m lectures_lib site

student: $(STAMP)
	$(BIN)/python -m lectures_lib student

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_speed.py
	$(BIN)/python benchmarks/training_speed.py
	$(BIN)/python benchmarks/decoding_speed.py
	$(BIN)/python benchmarks/variants_speed.py --markdown --plot benchmarks/variants_speed.png
	$(BIN)/python benchmarks/long_range.py --plot benchmarks/long_range.png

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info  # student/ is kept: your work
