#!/usr/bin/env bash
# Set up .venv, then check the code and run the whole test suite: lint (ruff check), format
# (ruff format --check, every file), types (mypy, the whole package), then the package tests and the checks
# of the built HTML, in headless Chromium too, on every core, with branch coverage and a floor on the core
# modules.  The book, whose build executes every chapter and its asserts, is built first if _build/html is
# missing or older than its sources; screenshots of every page go to _build/screenshots/.  Extra arguments
# go to pytest (e.g. -m "not slow and not book" for the fast tier).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Chromium for tests/test_browser.py; pdftotext for tests/test_pdf.py and TeX Live if the book must be rebuilt.
# Installed (if missing) in the background while the code is checked; the tests wait for it.
mkdir -p _build
(bash scripts/install_browser.sh && bash scripts/install_latex.sh) >_build/install_test_tools.log 2>&1 &
installing=$!
echo "::: ruff check" && .venv/bin/ruff check src tests bench scripts
echo "::: ruff format --check" && .venv/bin/ruff format --check src tests bench scripts
echo "::: mypy" && .venv/bin/mypy
if ! wait "$installing"; then
  cat _build/install_test_tools.log >&2
  echo "::: installing Chromium or TeX Live failed (above)" >&2
  exit 1
fi
cat _build/install_test_tools.log
# On every core (pytest-xdist; FLATBOOK_TEST_WORKERS=1 for one process), with branch coverage of the package
# by the tests (the chapters run in their own kernels and are not counted); the core modules must stay at or
# above CORE_COVERAGE_FLOOR per cent (measured 92 % when the floor was set).  The 25 slowest tests are listed
# at the end, to show where the suite's time goes.
.venv/bin/python -m pytest tests -n "${FLATBOOK_TEST_WORKERS:-auto}" --dist worksteal --durations=25 \
  --cov=flatbook --cov-branch --cov-report=term:skip-covered "$@"
CORE_COVERAGE_FLOOR=90
echo "::: branch coverage of the core modules (floor ${CORE_COVERAGE_FLOOR} %)"
core=$(printf '*/flatbook/%s.py,' activations network flatness flattest data gaussian global_flattest pricing \
  weighted_l1 relu_cells)
.venv/bin/coverage report --fail-under="$CORE_COVERAGE_FLOOR" --include="${core%,}"
