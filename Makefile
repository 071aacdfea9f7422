# The course's commands. `make lab` and `make test` work on a fresh clone with nothing installed:
# both create the virtual environment .venv (if missing) and install the course into it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Unit tests and notebooks run in parallel on this many workers (notebooks stay whole: loadscope).
WORKERS ?= 2

.PHONY: help venv lab test unit nbval lint notebooks student bench clean

help:
	@echo "make lab        open JupyterLab on notebooks/ (creates .venv on first use)"
	@echo "make test       lint + unit tests + execute every notebook under nbval"
	@echo "make notebooks  re-execute every notebook in place (refresh the stored outputs)"
	@echo "make student    write student versions (solutions stripped) to student/"
	@echo "make bench      attention, training and decoding speed benchmarks (not part of the tests)"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --quiet pip
	$(BIN)/python -m pip install --quiet -e '.[dev,grading]'
	@touch $(STAMP)

venv: $(STAMP)

lab: $(STAMP)
	$(BIN)/python -m lectures_lib.lab

test: $(STAMP) lint unit nbval

lint: $(STAMP)
	$(BIN)/ruff check lectures_lib tests benchmarks notebooks

unit: $(STAMP)
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadscope tests

nbval: $(STAMP)
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadscope --nbval-lax --nbval-current-env notebooks

notebooks: $(STAMP)
	$(BIN)/python -m lectures_lib.notebooks execute notebooks

student: $(STAMP)
	$(BIN)/python -m lectures_lib.exercises release notebooks student

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_speed.py
	$(BIN)/python benchmarks/training_speed.py
	$(BIN)/python benchmarks/decoding_speed.py
	$(BIN)/python benchmarks/variants_speed.py --markdown --plot benchmarks/variants_speed.png
	$(BIN)/python benchmarks/long_range.py --plot benchmarks/long_range.png

clean:
	rm -rf $(VENV) student .pytest_cache .ruff_cache build *.egg-info
