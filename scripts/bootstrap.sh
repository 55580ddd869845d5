#!/usr/bin/env bash
# Create (or reuse) the project's virtualenv in .venv and install kueue-es with its test tools.
# Installs the versions pinned in constraints.txt (scripts/lock.sh refreshes it), so a dependency's new release
# cannot change a run. Re-running is cheap: pip is skipped while pyproject.toml and constraints.txt are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extras='test,plot'
stamp=.venv/.kueue-es-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ] || [ "$(cat "$stamp")" != "$extras" ]; then
  .venv/bin/python -m pip install -q -c constraints.txt --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -c constraints.txt --build-constraint constraints.txt -e ".[$extras]"
  echo "$extras" > "$stamp"
fi
