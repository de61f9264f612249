#!/usr/bin/env bash
# Install the Debian TeX Live packages the whole-book PDF needs (scripts/build_pdf.sh), unless they are there:
# XeLaTeX (Jupyter Book's LaTeX builder always uses it), the LaTeX packages Sphinx's and Jupyter Book's
# LaTeX use, the FreeFont fonts Sphinx sets XeLaTeX in, latexmk and xindy (the index), and poppler-utils
# (pdftotext and pdfimages, for tests/test_pdf.py).  About 120 MB to download; apt, as root or with sudo.
set -euo pipefail
PACKAGES=(texlive-xetex texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended
  fonts-freefont-otf latexmk xindy poppler-utils)
have_tools() {
  for tool in xelatex latexmk xindy pdftotext pdfimages; do command -v "$tool" >/dev/null 2>&1 || return 1; done
}
# On Debian the packages themselves (the fonts and LaTeX packages have no command); elsewhere the commands.
if have_tools && { ! command -v dpkg >/dev/null 2>&1 || dpkg -s "${PACKAGES[@]}" >/dev/null 2>&1; }; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no XeLaTeX, latexmk, xindy or poppler-utils, and no apt-get to install them: install TeX Live (xetex," \
    "latex-extra), the FreeFont OpenType fonts, latexmk, xindy and poppler-utils yourself" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "installing Debian's TeX Live for the PDF of the book (needs apt and root): ${PACKAGES[*]}"
start=$(date +%s)
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "TeX Live installed in $(($(date +%s) - start)) s"
