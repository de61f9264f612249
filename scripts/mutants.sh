#!/usr/bin/env bash
# Mutation testing of core modules with mutmut, on demand (not in CI: it runs the core tests once per
# mutant, minutes for one module, hours for all).  Usage:
#   bash scripts/mutants.sh                               # activations, flatness, flattest, gaussian, network
#   bash scripts/mutants.sh src/flatbook/gaussian.py      # the modules you name
# Results go to mutants/ (git-ignored): `mutmut results` lists the survivors, `mutmut show NAME` shows one.
# Record the last result in README.md ("Testing the package").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
.venv/bin/python -m pip install --quiet "mutmut>=3.2"
if [ "$#" -eq 0 ]; then
  set -- src/flatbook/activations.py src/flatbook/flatness.py src/flatbook/flattest.py src/flatbook/gaussian.py \
         src/flatbook/network.py
fi
mkdir -p mutants
cp pyproject.toml mutants/pyproject.original.toml
trap 'cp mutants/pyproject.original.toml pyproject.toml' EXIT
# do_not_mutate = every module of the package except the ones asked for.
.venv/bin/python - "$@" <<'PY'
import pathlib, re, sys
wanted = {pathlib.Path(p).resolve() for p in sys.argv[1:]}
others = sorted(str(p) for p in pathlib.Path("src/flatbook").rglob("*.py") if p.resolve() not in wanted)
text = pathlib.Path("pyproject.toml").read_text()
text = text.replace("do_not_mutate = []", "do_not_mutate = " + repr(others).replace("'", '"'))
pathlib.Path("pyproject.toml").write_text(text)
PY
.venv/bin/mutmut run
.venv/bin/mutmut results
