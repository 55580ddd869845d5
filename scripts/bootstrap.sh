#!/usr/bin/env bash
# Create (or reuse) the project's virtualenv in .venv and install kueue-es with its test tools.
# Re-running is cheap: pip is skipped while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extras='test,plot'
stamp=.venv/.kueue-es-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$extras" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$extras]"
  echo "$extras" > "$stamp"
fi
