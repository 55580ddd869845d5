#!/usr/bin/env bash
# The whole test suite, including the integration tests against a real Apache Kafka broker and a real
# kube-apiserver + etcd, which the suite builds and starts itself (cached under ~/.cache/kueue-es, ~/.m2 and
# Go's caches, so later runs are fast). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
if [ -x scripts/kafka.sh ]; then ./scripts/kafka.sh install; fi
if [ -x scripts/kube.sh ]; then ./scripts/kube.sh install; fi
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
