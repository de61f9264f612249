#!/usr/bin/env bash
# Set up .venv, then check the code and run the whole test suite: lint (ruff check), format
# (ruff format --check, for the files pyproject.toml does not exclude yet), types of the core
# modules (mypy, files listed in pyproject.toml), then the package tests, every chapter as a
# notebook under nbval, and the checks of the built HTML, in headless Chromium too (the book is
# built first if _build/html is missing or older than its sources; screenshots of every page go
# to _build/screenshots/).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "::: ruff check" && .venv/bin/ruff check src tests bench scripts
echo "::: ruff format --check" && .venv/bin/ruff format --check src tests bench scripts
echo "::: mypy" && .venv/bin/mypy
bash scripts/install_browser.sh
rm -rf _build/notebooks
.venv/bin/python scripts/chapters_to_notebooks.py _build/notebooks
.venv/bin/python -m pytest tests _build/notebooks --nbval-lax --nbval-current-env "$@"
