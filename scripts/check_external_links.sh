#!/usr/bin/env bash
# Check every external link of the book (needs internet; not part of CI, never blocks a build).
# Sphinx's linkcheck builder writes its report to _build/linkcheck/output.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
.venv/bin/jupyter-book build . --builder linkcheck
status=$?
echo "report: $(pwd)/_build/linkcheck/output.txt (exit status $status; broken links are listed there)"
exit $status
