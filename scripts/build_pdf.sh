#!/usr/bin/env bash
# Build the whole book as one PDF with Jupyter Book's LaTeX builder (XeLaTeX), after the HTML build:
# _build/latex/flatbook.pdf, copied to _build/html/flatbook.pdf, which every HTML page links.
#
# No chapter is executed again: without --all the LaTeX builder reuses the HTML build's Sphinx environment
# (_build/.doctrees, shared by both builders), whose doctrees already hold every executed notebook's outputs;
# MyST-NB picks each output's format for LaTeX (PNG, not SVG) when the pages are written.  A source changed
# since the HTML build would be read, and executed, again: the script then stops, since the PDF would no
# longer match the HTML.  Installs TeX Live first (scripts/install_latex.sh).  The log is _build/latex.log.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f _build/.doctrees/environment.pickle ] || [ ! -f _build/html/index.html ]; then
  echo "no HTML build to make the PDF from: run bash scripts/build_book.sh" >&2
  exit 1
fi
bash scripts/install_latex.sh
log=_build/latex.log
start=$(date +%s)
status=0
.venv/bin/jupyter-book build . --builder pdflatex -W -n --keep-going >"$log" 2>&1 || status=$?
executed=$(grep -c 'Executing notebook' "$log" || true)
name=$(.venv/bin/python -c 'import yaml; print(yaml.safe_load(open("_config.yml"))["latex"]["latex_documents"]["targetname"])')
pdf="_build/latex/${name%.tex}.pdf"
if [ "$status" -ne 0 ] || grep -q 'Failed to build pdf' "$log" || [ ! -f "$pdf" ]; then
  tail -n 40 "$log" >&2
  echo "::: the PDF build failed (exit $status); the whole log is $log" >&2
  exit 1
fi
if [ "$executed" -ne 0 ]; then
  grep 'Executing notebook' "$log" >&2
  echo "::: the PDF build executed $executed notebook(s) again: their sources changed after the HTML build." \
    "Rebuild both (bash scripts/build_book.sh)." >&2
  exit 1
fi
cp "$pdf" _build/html/
echo "::: PDF built in $(($(date +%s) - start)) s: $pdf ($(du -h "$pdf" | cut -f1)), linked from every page as" \
  "_build/html/$(basename "$pdf")"
