#!/usr/bin/env bash
# Set up .venv, then execute every chapter and build the book to static HTML in _build/html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/jupyter-book build . --all -W -n --keep-going
echo "The book is at $(pwd)/_build/html/index.html"
