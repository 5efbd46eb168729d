# Two commands for a newcomer: `make book` renders the book, `make test` runs everything CI runs.
# Both create .venv on first use and install the pinned toolchain (requirements.txt) plus the package.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHAPTERS ?=
# What make pdf needs (Debian/Ubuntu; about 0.6 GB): installed by make pdf when missing and run as root.
TEX_PACKAGES := texlive-xetex texlive-latex-extra texlive-fonts-recommended latexmk fonts-freefont-otf fonts-dejavu-core xindy poppler-utils
# Clear a forced matplotlib backend: it makes notebook figures vanish (CONTRIBUTING.md).
export MPLBACKEND :=
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: book test test-fast execute editions html lint format-chapters pairs unit nbval nbval-1thread nbval-both browser bubblewrap assignments benchmarks pdf clean clean-testcache help

help:
	@echo "make book        render the book into _build/html (first run: creates .venv, ~2 min)"
	@echo "make test        the whole test suite, as CI runs it"
	@echo "make test-fast   lint, build and the fast tests (no slow, browser or nbval): under 90 s"
	@echo "make execute     re-execute chapters/NN_*.md into their .ipynb (CHAPTERS=chapters/01_hermite.md for one)"
	@echo "make editions    regenerate the Colab/Jupyter editions notebooks/NN_*.ipynb from the executed chapters"
	@echo "make format-chapters  ruff-format chapter code (CHAPTERS=... for some), then lint with make lint"
	@echo "make explorer-data  regenerate the theory explorer's teacher table, simulated points and figure"
	@echo "make assignments student and instructor notebooks into _build/assignments"
	@echo "make benchmarks  speed and memory tables"
	@echo "make lock        regenerate the lock requirements.txt from requirements.in"
	@echo "make pdf         the PDF edition (A4), _build/latex/icl-book.pdf, checked (booktools/pdf_log.py); 'make pdf html': a site that links it"
	@echo "make clean-testcache  forget the passes make test remembers (it re-runs everything next time)"
	@echo "make publish     the whole published site in _build/html: HTML, PDF, editions, wheel"

# --- setup: idempotent; reinstalls only when requirements.txt or pyproject.toml change -----------------
# requirements.txt is the lock (every package, exact versions, hashes), generated from requirements.in
# by `make lock`; pip checks every hash.
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' || \
	  { echo "error: Python >= 3.10 is needed, found $$($(PYTHON) --version 2>&1); run 'make PYTHON=python3.11 ...'"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	@touch $(STAMP)

# Regenerate the lock from requirements.in (pip-tools in its own venv). It keeps the pins already in
# requirements.txt; `make lock LOCK_FLAGS=--upgrade` (or --upgrade-package NAME) moves them. The local
# CPU wheel of torch is named 2.13.0+cpu, which no registry serves: the pin is written without it.
LOCK_TOOLS := $(VENV)/piptools
LOCK_FLAGS ?=
lock:
	@test -x $(LOCK_TOOLS)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_TOOLS) && \
	  $(LOCK_TOOLS)/bin/pip install --quiet --disable-pip-version-check pip-tools==7.7.0; }
	$(LOCK_TOOLS)/bin/pip-compile --quiet --allow-unsafe --generate-hashes --strip-extras \
	  --no-emit-index-url --no-emit-find-links $(LOCK_FLAGS) --output-file=requirements.txt requirements.in
	sed -i 's/^torch==\([^ +]*\)+cpu /torch==\1 /' requirements.txt

# --- the book -----------------------------------------------------------------------------------------
# Publishes _build/latex/icl-book.pdf with the site when `make pdf` has built it (see pdf below).
# BUILD_ROOT: where _build/ goes (tests/test_pdf.py builds a PDF and its site in a temporary folder).
BUILD_ROOT ?= .
html: $(STAMP)
	$(BIN)/jupyter-book build . --all --builder html -W -n --keep-going --path-output $(BUILD_ROOT)
	@echo "Open the book: file://$(CURDIR)/_build/html/index.html"

book: html

execute: $(STAMP)
	$(BIN)/python -m booktools.notebooks execute $(CHAPTERS)
	$(BIN)/python -m booktools.notebooks figure-index
	$(BIN)/python -m booktools.assignments table --write chapters/instructors.md
	$(MAKE) --no-print-directory editions

# The plain-notebook editions that Colab and Jupyter open (booktools/editions.py); numbers and titles come
# from the index every book build writes (_build/book-index.json, booktools/sphinx/ext), or from a
# temporary read of the book when that is stale.
editions: $(STAMP)
	$(BIN)/python -m booktools.editions build

# The theory explorer's data (chapters/explorer.md): teacher table from icl_book.hermite, simulated points,
# the PDF's static figure (_extra/explorer/; a few minutes). tests/test_explorer.py fails when it is stale.
.PHONY: explorer-data
explorer-data: $(STAMP)
	$(BIN)/python -m booktools.explorer_data

assignments: $(STAMP)
	$(BIN)/python -m booktools.assignments build --out _build/assignments

benchmarks: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# --- the test suite (CI runs `make test` and nothing else) --------------------------------------------
# Chapters are linted in their executed .ipynb (ruff reads notebooks and understands %pip); the pair
# check keeps those inputs equal to the .md sources. chapters/ruff.toml sets their width to 88.
lint: $(STAMP)
	$(BIN)/ruff check icl_book booktools tests benchmarks chapters
	$(BIN)/ruff format --check icl_book booktools tests benchmarks chapters

# Format chapter code: .md -> .ipynb inputs, ruff on the notebook, then back into the .md.
format-chapters: $(STAMP)
	@for f in $(or $(CHAPTERS),chapters/[0-9][0-9]_*.md); do \
	  nb=$${f%.md}.ipynb; \
	  $(BIN)/jupytext --quiet --sync $$f && \
	  $(BIN)/ruff check --fix-only --quiet $$nb && $(BIN)/ruff format --quiet $$nb && \
	  touch $$nb && $(BIN)/jupytext --quiet --sync $$nb || exit 1; \
	done

pairs: $(STAMP)
	$(BIN)/python -m booktools.notebooks check-pairs

# The test suite in two processes (pytest-xdist, --dist loadgroup: each module's tests in one process,
# tests/conftest.py spreads the heaviest ones and hands out the longest groups first), with the local cache of passes (booktools/testcache.py):
# a test that passed before with exactly the same inputs is not re-run, and says so at the end. A clean
# checkout (and CI, where CI is set) has no cache and runs everything; ICL_TESTCACHE=off make test
# runs everything anyway; make clean-testcache forgets every pass.
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
TESTCACHE := -p booktools.testcache
# One BLAS/OpenMP thread in each process and in every kernel it starts (Run all, grading, nbgrader):
# the two test processes already keep both cores busy, and a second thread only spin-waits (chapter
# 3 took 93 CPU-seconds with two threads against 76 with one). Outputs at 1 and 2 threads are the
# nbval stages' job.
UNIT_THREADS := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unit: $(STAMP) bubblewrap
	$(UNIT_THREADS) $(PYTEST) $(TESTCACHE) -n 2 --dist loadgroup --no-loadscope-reorder --durations=40 tests

clean-testcache:
	rm -rf .testcache

# The quick loop while editing the package: lint, the build, and every test not marked slow or
# browser (no nbval, no notebook execution). Under 90 s on 2 cores.
test-fast: $(STAMP)
	$(BIN)/ruff check icl_book tests benchmarks
	$(BIN)/jupyter-book build . --builder html -W -n --keep-going -q
	$(BIN)/pytest -p no:cacheprovider -q -m "not slow and not browser" tests

# Two chapters at a time (pytest-xdist; --dist loadfile keeps each notebook's cells, in order, in one
# kernel). Each kernel keeps the stage's BLAS thread count, so outputs are still checked with 2 threads
# and with 1; the package runs its tiny-matrix code on one BLAS thread (icl_book._blas), so two kernels
# side by side do not spin against each other.
# A chapter that passed with the same inputs (its notebook, the package, the sanitizer, the lock, the
# platform, the thread count: booktools/testcache.py) is not re-run. NBVAL_JOBS: chapters side by side.
NBVAL_JOBS ?= 2
NBVAL := $(PYTEST) $(TESTCACHE) -n $(NBVAL_JOBS) --dist loadfile --nbval --nbval-sanitize-with nbval_sanitize.cfg
nbval: $(STAMP)
	OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 $(NBVAL) chapters/[0-9][0-9]_*.ipynb

# Outputs must not depend on the number of threads: re-check with one. This stage is also the student's
# "Run all": each chapter's student edition with its solutions interleaved (booktools/student_run.py), so
# the stubs and unanswered checks run and every chapter cell is still compared, in one body run. Its
# kernel is a fresh venv's (booktools/fresh_venv.py): the package's wheel, what the wheel declares,
# ipykernel and myst-nb (for glue), started in an empty folder, as a student's runtime runs it.
FRESH_VENV := _build/fresh-venv
STUDENT_RUN := _build/student-run
nbval-1thread: $(STAMP)
	$(BIN)/python -m booktools.fresh_venv $(FRESH_VENV) --link myst-nb
	$(BIN)/python -m booktools.student_run $(STUDENT_RUN)
	JUPYTER_PATH=$(CURDIR)/$(FRESH_VENV)/jupyter OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
	  $(NBVAL) --nbval-kernel-name icl-fresh $(STUDENT_RUN)/*.ipynb

# Both thread settings at once, one chapter at a time each (two kernels in all, as above): the whole
# book takes as long as the two stages one after the other, and one edited chapter half as long.
# Each stage's output is printed whole when it ends (--output-sync).
nbval-both: $(STAMP)
	@$(MAKE) --no-print-directory -j2 --output-sync=target NBVAL_JOBS=1 nbval nbval-1thread

# The browser check: Debian's chromium (installed when missing and we are root, as in CI), driven by
# playwright from the lock (never `playwright install`), and axe-core from npm (package-lock.json).
browser: node_modules/.package-lock.json
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser check ..."; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: chromium is missing; the browser test will fail: run 'sudo apt-get install chromium'"; fi; }

# The grader's box (booktools/grading/sandbox.py) is bubblewrap's: installed when missing and we are root,
# as chromium is; otherwise the grading tests fail, saying to install it.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's bubblewrap for the grader's box ..."; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "note: bwrap is missing; the grader refuses to grade and its tests fail: run 'sudo apt-get install bubblewrap'"; fi; }

node_modules/.package-lock.json: package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing npm for axe-core ..."; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; \
	  else echo "error: npm is missing (axe-core for the browser test): run 'sudo apt-get install npm'"; exit 1; fi; }
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

# The stages in order (booktools/stages.py; the PDF before the HTML, which then publishes and links it): it stops at the first failure and always ends with the
# time of each stage, so that a slow-down shows in every CI log.
test: $(STAMP) browser bubblewrap
	@MAKE="$(MAKE)" $(BIN)/python -m booktools.stages lint pairs pdf html unit nbval-both

# The PDF edition (A4): xelatex into _build/latex/icl-book.pdf, then its log checked (booktools/pdf_log.py):
# any missing character, undefined reference or citation, or box overfull by more than 5 pt fails. The
# TeX packages are installed when missing and we are root (as the browser stage installs chromium; CI's
# runner is root), else the apt-get line is printed. An HTML build made while the PDF exists publishes
# it as _build/html/icl-book.pdf and links it from the introduction and every page's download menu
# (booktools/sphinx/ext/_pdf.py), so `make pdf html` gives a site with the PDF, as `make publish` does. An
# HTML build without a PDF has no such link, so no link is ever dead.
pdf: $(STAMP)
	@command -v xelatex >/dev/null 2>&1 && command -v latexmk >/dev/null 2>&1 && fc-list | grep -q "DejaVu Sans Mono" || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the TeX packages for the PDF (about 0.6 GB) ..."; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEX_PACKAGES) >/dev/null; \
	  else echo "error: the PDF needs TeX: run 'sudo apt-get install --no-install-recommends $(TEX_PACKAGES)'"; exit 1; fi; }
	$(BIN)/jupyter-book build . --all --builder pdflatex --path-output $(BUILD_ROOT)
	$(BIN)/python -m booktools.pdf_log $(BUILD_ROOT)/_build/latex/icl-book.log
	@echo "PDF: $(abspath $(BUILD_ROOT))/_build/latex/icl-book.pdf; 'make html' publishes it with the site"

# The published site in one folder, _build/html: the editions (make editions), the whole-book PDF and the
# HTML (make pdf; the HTML build copies the PDF, the editions and the chapters' .md sources in), and the
# package's wheel at packages/, where every chapter's Colab install cell fetches it (booktools/publish.py
# builds it and checks the folder). KEEP_FROM=<the site's URL> keeps the wheels the site serves now (older
# editions pin them). .github/workflows/pages.yml runs this command on a commit whose tests passed.
.PHONY: publish
publish: $(STAMP)
	$(MAKE) --no-print-directory editions
	$(MAKE) --no-print-directory pdf
	$(MAKE) --no-print-directory html
	$(BIN)/python -m booktools.publish _build/html $(if $(KEEP_FROM),--keep-from $(KEEP_FROM))

clean:
	rm -rf _build .testcache
