#!/usr/bin/env bash
# The main job on embedded defaults: no cluster, no Kafka. Sets itself up on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
exec .venv/bin/kueue-es demo "$@"
