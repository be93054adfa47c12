# The two commands of the README:
#   make book   create the environment and build the HTML book (executes every chapter)
#   make test   ruff and import-linter, unit tests + doctests, every chapter under
#               nbval, the book built with warnings as errors, and the built HTML
#               checked in Chromium
# COMPANION_PROFILE=quick|full selects the profile (default quick).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export COMPANION_PROFILE ?= quick
# PyTorch's CPU allocator puts tensors of 2 MB or more on transparent huge pages: one page fault per 2 MB instead of
# 512 per fresh allocation. The LLM stand-ins' vocabulary-sized logits (8 x 64 x 50257 floats, several per step)
# trained in 96 s instead of 133 (GPT-2) and 87 s instead of 125 (GPT-NeoX) on 2026-12-06, with the same weights
# bitwise; the small models' runs neither gain nor change. Where the kernel lacks huge pages, PyTorch warns once and
# allocates as before.
export THP_MEM_ALLOC_ENABLE ?= 1

.PHONY: book test env lint unit notebooks html html-check browser clean

env: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# The book is `jupyter-book build --all -W -n --keep-going .` with the chapters executed BOOK_JOBS at a time
# (Sphinx's parallel reading, which Jupyter Book's command line does not expose; scripts/build_book.py).
book: env
	$(BIN)/python scripts/build_book.py --jobs $(BOOK_JOBS)

# Formatting, a small lint rule set and the package's floors (settings in pyproject.toml).
LINTED := companion tests benchmarks scripts conftest.py
lint: env
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/lint-imports --no-cache

# Tests and chapters run in TEST_JOBS processes (pytest-xdist), each on one thread, so that the numbers do not
# depend on how many cores the machine has. Unit tests are shared test by test (worksteal: the paper-scale smoke
# tests of tests/test_full_config.py, half the unit time, no longer sit in one process); a chapter's cells stay in
# one kernel, in order (loadfile).
TEST_JOBS ?= 2
XDIST_UNIT := -n $(TEST_JOBS) --dist worksteal
XDIST := -n $(TEST_JOBS) --dist loadfile
BOOK_JOBS ?= $(TEST_JOBS)

unit: env
	$(BIN)/python -m pytest -q $(XDIST_UNIT) tests companion --doctest-modules -m "not html"

notebooks: env
	$(BIN)/python -m pytest -q $(XDIST) --nbval-lax --nbval-cell-timeout=3600 -p no:cacheprovider book

html: env
	rm -rf _build/html _build/.doctrees _build/jupyter_execute
	$(BIN)/python scripts/build_book.py --jobs $(BOOK_JOBS)

html-check: env browser
	$(BIN)/python -m pytest -q -m html tests/test_html.py

# Headless Chromium renders the built pages for the HTML check (Debian package).
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null \
	  || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

test: lint unit notebooks html html-check

# Tests never download: the LLM chapters fall back to their labelled stand-ins at once
# (with network access, `make book` tries the Hub first; see the LLM chapters).
unit notebooks html html-check test: export HF_HUB_OFFLINE = 1
unit notebooks html: export OMP_NUM_THREADS = 1
unit notebooks html: export MKL_NUM_THREADS = 1
unit notebooks html: export OPENBLAS_NUM_THREADS = 1

clean:
	rm -rf _build .cache .pytest_cache
