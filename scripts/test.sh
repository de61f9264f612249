#!/usr/bin/env bash
# Set up .venv, then run the whole test suite: the package tests, every chapter as a
# notebook under nbval, and the checks of the built HTML, in headless Chromium too (the
# book is built first if _build/html is missing or older than its sources; screenshots
# of every page go to _build/screenshots/).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install_browser.sh
rm -rf _build/notebooks
.venv/bin/python scripts/chapters_to_notebooks.py _build/notebooks
.venv/bin/python -m pytest tests _build/notebooks --nbval-lax --nbval-current-env "$@"
