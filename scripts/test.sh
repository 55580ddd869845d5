#!/usr/bin/env bash
# The whole test suite, including the integration tests against a real Apache Kafka broker and a real
# kube-apiserver + etcd, which the suite builds and starts itself (cached under ~/.cache/kueue-es, ~/.m2 and
# Go's caches, so later runs are fast). Extra arguments go to pytest.
#
# Two pytest runs, both always run: the unit tests spread over one worker per CPU (pytest-xdist), then
# tests/integration in one process (its broker and apiserver are session fixtures, one of each). The script
# fails if either fails; a run that collects no tests (pytest's exit code 5) is a failure here. Arguments that
# choose tests (a path, -k, -m) give one plain pytest run over what they choose, as before.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
if [ -x scripts/kafka.sh ]; then ./scripts/kafka.sh install; fi
if [ -x scripts/kube.sh ]; then ./scripts/kube.sh install; fi

choosing=0
for arg in "$@"; do
  case "$arg" in
    -k | -m | -k* | -m* | --deselect* | --ignore* | tests | tests/* | ./tests*) choosing=1 ;;
  esac
done

status=0
run() {  # run pytest with the given arguments; remember the first failure
  local rc=0
  .venv/bin/python -m pytest -p no:cacheprovider "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    rc=1
  fi
  if [ "$status" -eq 0 ]; then status=$rc; fi
  return 0
}

if [ "$choosing" -eq 1 ]; then
  run "$@"
else
  run -n auto --ignore=tests/integration "$@"
  if [ "$status" -ne 2 ]; then  # 2: interrupted (Ctrl-C) — stop there
    run tests/integration "$@"
  fi
fi
exit "$status"
