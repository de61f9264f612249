#!/usr/bin/env bash
# Set up .venv, then run the whole test suite: the package tests, every chapter as a
# notebook under nbval, and the checks of the built HTML (which builds the book first
# if _build/html is missing or older than its sources).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rm -rf _build/notebooks
.venv/bin/python scripts/chapters_to_notebooks.py _build/notebooks
.venv/bin/python -m pytest tests _build/notebooks --nbval-lax --nbval-current-env "$@"
