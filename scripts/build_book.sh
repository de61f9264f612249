#!/usr/bin/env bash
# Set up .venv, then execute every chapter and build the book to static HTML in _build/html, then the
# whole-book PDF from the same executed chapters (scripts/build_pdf.sh: TeX Live, _build/html/flatbook.pdf).
# The build log is kept in _build/build.log; at the end each chapter's execution time is printed
# (from MyST-NB's "Executed notebook in ... seconds"), and a failed build names the chapter it was
# executing and the cell's error or timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p _build
# TeX Live for the PDF (if missing) is installed in the background while the chapters execute.
bash scripts/install_latex.sh >_build/install_latex.log 2>&1 &
installing=$!
log=_build/build.log
status=0
.venv/bin/jupyter-book build . --all -W -n --keep-going 2>&1 | tee "$log" || status=$?
echo "::: chapter execution times (seconds; each cell's limit is the timeout in _config.yml)"
sed -n 's/^.*\/\(book\/[^:]*\): Executed notebook in \([0-9.]*\) seconds.*$/  \2\t\1/p' "$log" | sort -rn
if [ "$status" -ne 0 ]; then
  chapter=$(grep -o 'book/[^:]*: Executing notebook' "$log" | tail -n 1 | cut -d: -f1 || true)
  echo "::: the build failed (exit $status); last chapter being executed: ${chapter:-none}" >&2
  grep -n -E 'CellExecutionError|CellTimeoutError|Timeout|Traceback|Error' "$log" | tail -n 20 >&2 || true
  exit "$status"
fi
if ! wait "$installing"; then
  cat _build/install_latex.log >&2
  echo "::: installing TeX Live failed (above)" >&2
  exit 1
fi
cat _build/install_latex.log
bash scripts/build_pdf.sh
echo "The book is at $(pwd)/_build/html/index.html"
