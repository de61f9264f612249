#!/usr/bin/env bash
# Create .venv in the repository and install flatbook with its book and test extras.
# An existing torch in .venv (e.g. a CUDA build you installed first) is kept; otherwise
# FLATBOOK_TORCH (default torch==2.13.0) is installed before anything else can pull a
# different build.  Safe to re-run: it only installs what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "flatbook needs Python >= 3.11, found " + sys.version' 
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install --quiet "${FLATBOOK_TORCH:-torch==2.13.0}"
fi
.venv/bin/python -m pip install --quiet -e ".[book,test]"
.venv/bin/python -c "import flatbook, torch; print('flatbook', flatbook.__version__, '| torch', torch.__version__, '| CUDA available:', torch.cuda.is_available())"
