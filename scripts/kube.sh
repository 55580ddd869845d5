#!/usr/bin/env bash
# A real kube-apiserver + etcd for integration tests and CI, built from source
# by tools/kube (Go module proxy) and cached per Kubernetes version.
#
#   scripts/kube.sh install                 build kube-apiserver + etcd (cached, idempotent)
#   scripts/kube.sh start DIR               start a fresh, empty etcd + kube-apiserver on free
#                                           loopback ports; write DIR/kubeconfig and DIR/env
#   scripts/kube.sh stop DIR                stop both, SIGKILL: the cluster is disposable (idempotent)
#   scripts/kube.sh restart-apiserver DIR   restart only kube-apiserver (graceful SIGTERM, same
#                                           port and flags; etcd keeps running with its data)
#   scripts/kube.sh compact DIR             compact etcd to its current revision
#   scripts/kube.sh status DIR              print DIR/env and whether processes are alive
#
# The cluster is etcd (--unsafe-no-fsync) + kube-apiserver only: no controller-manager or
# scheduler, hence no garbage collector (delete with propagationPolicy=Background), no
# namespace controller (deleted namespaces stay Terminating) and no job/pod controllers.
# Authorization is RBAC. DIR/kubeconfig authenticates with a client certificate in
# system:masters; KUBE_TOKEN in DIR/env is a static bearer token for the same admin. The
# ServiceAccount admission plugin is off (nothing creates "default" service accounts).
# The aggregation layer is on: a front-proxy CA and client certificate (--requestheader-*,
# --proxy-client-*, published in kube-system/extension-apiserver-authentication) and
# --enable-aggregator-routing, so an APIService's Service is reached at its endpoints' addresses
# (there is no kube-proxy for cluster IPs).
#
# Environment:
#   KUEUE_ES_CACHE          cache root (default ~/.cache/kueue-es); binaries go to
#                           $KUEUE_ES_CACHE/kube/<kubernetes version>/
#   GO                      go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   KUBE_OWNER_PID          (start) stop the cluster automatically once this pid exits
#   KUBE_WATCH_CACHE        (start) true (default) | false: the apiserver's --watch-cache
#   KUBE_APISERVER_EXTRA_ARGS  (start) extra kube-apiserver flags, whitespace separated
#   KUBE_APISERVER_V        (start) kube-apiserver log verbosity (default 1)
#   KUBE_START_TIMEOUT      (start) seconds to wait for readiness (default 180)
#
# Exit status 3 means "no Go toolchain and no cached binaries" (callers may skip).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/tools/kube"
SELF="$ROOT/scripts/kube.sh"
CACHE_ROOT="${KUEUE_ES_CACHE:-$HOME/.cache/kueue-es}"
# Bump when the way binaries are built changes (flags, ldflags, packages).
RECIPE=1

log() { printf '[kube.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

modver() { # modver MODULE: version of MODULE required in tools/kube/go.mod
  sed -nE "s#^(require)?[[:space:]]*$1[[:space:]]+(v[^[:space:]]+).*#\\2#p" "$TOOLS/go.mod" | head -n1
}

KUBE_VERSION="$(modver 'k8s\.io/kubernetes')"
ETCD_VERSION="$(modver 'go\.etcd\.io/etcd/server/v3')"
[[ -n $KUBE_VERSION && -n $ETCD_VERSION ]] || die "cannot read versions from $TOOLS/go.mod"
BIN_DIR="$CACHE_ROOT/kube/$KUBE_VERSION"
KUBE_APISERVER="$BIN_DIR/kube-apiserver"
ETCD="$BIN_DIR/etcd"

find_go() {
  if [[ -n ${GO:-} ]]; then command -v "$GO" || true; return; fi
  command -v go || { [[ -x /usr/local/go/bin/go ]] && echo /usr/local/go/bin/go; } || true
}

stamp() { # content hash of everything that determines the binaries
  { echo "recipe=$RECIPE"; cat "$TOOLS/go.mod" "$TOOLS/go.sum" "$TOOLS/cmd/etcd/main.go"; } | sha256sum | cut -c1-32
}

print_install() {
  echo "KUBE_VERSION=$KUBE_VERSION"
  echo "ETCD_VERSION=$ETCD_VERSION"
  echo "KUBE_BIN_DIR=$BIN_DIR"
  echo "KUBE_APISERVER=$KUBE_APISERVER"
  echo "ETCD=$ETCD"
}

installed() {
  [[ -x $KUBE_APISERVER && -x $ETCD && -f $BIN_DIR/.stamp && "$(cat "$BIN_DIR/.stamp")" == "$(stamp)" ]]
}

cmd_install() {
  if installed; then print_install; return 0; fi
  local go; go="$(find_go)"
  if [[ -z $go ]]; then
    log "no Go toolchain found (PATH, \$GO, /usr/local/go/bin) and no cached binaries in $BIN_DIR"
    exit 3
  fi
  mkdir -p "$BIN_DIR"
  # Serialise concurrent installs (parallel test sessions, CI steps).
  exec 9>"$BIN_DIR/.lock"
  flock 9
  if installed; then print_install; return 0; fi
  log "building kube-apiserver $KUBE_VERSION and etcd $ETCD_VERSION with $("$go" version | cut -d' ' -f3) into $BIN_DIR"
  log "(cold: module download + compile takes several minutes; later runs hit the Go caches)"
  local major minor ldk
  major="${KUBE_VERSION#v}"; major="${major%%.*}"
  minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
  ldk="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldk+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldk+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=module-proxy-$KUBE_VERSION"
  done
  local t0=$SECONDS
  (
    cd "$TOOLS"
    export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
    "$go" build -ldflags "$ldk" -o "$BIN_DIR/.kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
    "$go" build -ldflags "-s -w" -o "$BIN_DIR/.etcd.tmp" ./cmd/etcd
  )
  mv -f "$BIN_DIR/.kube-apiserver.tmp" "$KUBE_APISERVER"
  mv -f "$BIN_DIR/.etcd.tmp" "$ETCD"
  stamp >"$BIN_DIR/.stamp"
  log "built in $((SECONDS - t0))s"
  print_install
}

# ---------------------------------------------------------------- cluster --

need_dir() {
  [[ -n ${1:-} ]] || die "usage: $0 ${CMD} DIR"
  mkdir -p "$1"
  DIR="$(cd "$1" && pwd)"
  PKI="$DIR/pki"
}

# running PID: the process exists and is not a zombie (dead children reparented to
# pid 1 may linger as zombies until it reaps them).
running() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ ${stat:0:1} != Z ]]
}

alive() { local f="$DIR/$1.pid"; [[ -f $f ]] && running "$(cat "$f")"; }

stop_proc() { # stop_proc NAME [SIGNAL]: send SIGNAL (default TERM), wait, then SIGKILL
  local f="$DIR/$1.pid" sig="${2:-TERM}" pid i
  [[ -f $f ]] || return 0
  pid="$(cat "$f")"
  if running "$pid"; then
    kill -"$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do running "$pid" || break; sleep 0.1; done
    if running "$pid"; then
      log "$1 (pid $pid) ignored SIG$sig for 30s; killing"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do running "$pid" || break; sleep 0.1; done
    fi
  fi
  rm -f "$f"
}

free_ports() { # free_ports N: N distinct currently-free loopback TCP ports
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

gen_pki() {
  [[ -f $PKI/.done-v2 ]] && return 0
  command -v openssl >/dev/null || die "openssl is required"
  rm -rf "$PKI"; mkdir -p "$PKI"
  (
    cd "$PKI"
    umask 077
    cat >ca.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = kueue-es-test-ca
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
EOF
    cat >server.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = IP:127.0.0.1, IP:10.96.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
EOF
    cat >client.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF
    local q=(-days 3650)
    openssl req -x509 -config ca.cnf -extensions v3_ca -newkey rsa:2048 -nodes \
      -keyout ca.key -out ca.crt "${q[@]}" 2>/dev/null
    openssl req -new -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out apiserver.crt -extfile server.ext "${q[@]}" 2>/dev/null
    openssl req -new -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
      -subj "/O=system:masters/CN=kueue-es-admin" 2>/dev/null
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out admin.crt -extfile client.ext "${q[@]}" 2>/dev/null
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
    openssl rand -hex 24 >admin.token
    echo "$(cat admin.token),kueue-es-admin,kueue-es-admin,\"system:masters\"" >tokens.csv
    # the aggregation layer's own CA and the client certificate it proxies with
    sed 's/kueue-es-test-ca/kueue-es-front-proxy-ca/' ca.cnf >front-proxy-ca.cnf
    openssl req -x509 -config front-proxy-ca.cnf -extensions v3_ca -newkey rsa:2048 -nodes \
      -keyout front-proxy-ca.key -out front-proxy-ca.crt "${q[@]}" 2>/dev/null
    openssl req -new -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr \
      -subj "/CN=front-proxy-client" 2>/dev/null
    openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
      -CAcreateserial -out front-proxy-client.crt -extfile client.ext "${q[@]}" 2>/dev/null
    touch .done-v2
  )
}

b64() { base64 -w0 <"$1"; }

write_kubeconfig() {
  cat >"$DIR/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kueue-es
  cluster:
    server: $SERVER
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: kueue-es-admin
  user:
    client-certificate-data: $(b64 "$PKI/admin.crt")
    client-key-data: $(b64 "$PKI/admin.key")
contexts:
- name: kueue-es
  context:
    cluster: kueue-es
    user: kueue-es-admin
current-context: kueue-es
EOF
  chmod 600 "$DIR/kubeconfig.tmp"
  mv -f "$DIR/kubeconfig.tmp" "$DIR/kubeconfig"
}

load_env() {
  [[ -f $DIR/env ]] || die "$DIR/env not found: was the cluster started with '$0 start $DIR'?"
  # shellcheck disable=SC1091
  source "$DIR/env"
  SERVER="$KUBE_SERVER"
}

# wait_for NAME PIDNAME TIMEOUT CMD...: poll CMD until it succeeds
wait_for() {
  local name=$1 pidname=$2 timeout=$3 t0=$SECONDS; shift 3
  until "$@" >/dev/null 2>&1; do
    if ! alive "$pidname"; then
      log "$name exited during startup; last log lines ($DIR/$pidname.log):"
      tail -n 40 "$DIR/$pidname.log" >&2 || true
      return 1
    fi
    if ((SECONDS - t0 > timeout)); then
      log "$name not ready after ${timeout}s; last log lines ($DIR/$pidname.log):"
      tail -n 40 "$DIR/$pidname.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

# shellcheck disable=SC2317  # invoked indirectly, through wait_for
etcd_healthy() { curl -sf --max-time 2 "$ETCD_ENDPOINT/health" | grep -q '"health":"true"'; }

# shellcheck disable=SC2317  # invoked indirectly, through wait_for
apiserver_ready() {
  local c=(curl -sf --max-time 5 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")")
  "${c[@]}" "$SERVER/readyz" >/dev/null && "${c[@]}" "$SERVER/api/v1/namespaces/default" >/dev/null
}

spawn() { # spawn NAME ARGS...: run detached, output to DIR/NAME.log, pid to DIR/NAME.pid
  local name=$1; shift
  echo "---- $(date -u +%FT%TZ) $*" >>"$DIR/$name.log"
  setsid "$@" </dev/null >>"$DIR/$name.log" 2>&1 &
  echo $! >"$DIR/$name.pid"
}

start_apiserver() {
  local args=()
  mapfile -t args <"$DIR/apiserver.args"
  spawn apiserver "$KUBE_APISERVER" "${args[@]}"
  wait_for kube-apiserver apiserver "${KUBE_START_TIMEOUT:-180}" apiserver_ready
}

cmd_start() {
  need_dir "${1:-}"
  if alive etcd || alive apiserver; then die "a cluster is already running in $DIR (use stop first)"; fi
  cmd_install >/dev/null
  command -v curl >/dev/null || die "curl is required"
  gen_pki
  local attempt
  for attempt in 1 2 3; do
    read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT <<<"$(free_ports 3)"
    ETCD_ENDPOINT="http://127.0.0.1:$ETCD_PORT"
    SERVER="https://127.0.0.1:$APISERVER_PORT"
    rm -rf "$DIR/etcd-data"
    spawn etcd "$ETCD" --name kueue-es --data-dir "$DIR/etcd-data" \
      --listen-client-urls "$ETCD_ENDPOINT" --advertise-client-urls "$ETCD_ENDPOINT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster "kueue-es=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
      --unsafe-no-fsync --log-level warn
    if wait_for etcd etcd 60 etcd_healthy; then break; fi
    stop_proc etcd
    grep -q "address already in use" "$DIR/etcd.log" && ((attempt < 3)) && { log "port clash; retrying"; continue; }
    die "etcd did not start"
  done
  # shellcheck disable=SC2206
  local extra=(${KUBE_APISERVER_EXTRA_ARGS:-})
  printf '%s\n' \
    --etcd-servers="$ETCD_ENDPOINT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount \
    --allow-privileged=true --profiling=false \
    --watch-cache="${KUBE_WATCH_CACHE:-true}" \
    --v="${KUBE_APISERVER_V:-1}" \
    "${extra[@]}" >"$DIR/apiserver.args"
  write_kubeconfig
  cat >"$DIR/env" <<EOF
KUBECONFIG=$DIR/kubeconfig
KUBE_SERVER=$SERVER
KUBE_TOKEN=$(cat "$PKI/admin.token")
KUBE_CA=$PKI/ca.crt
ETCD_ENDPOINT=$ETCD_ENDPOINT
KUBE_VERSION=$KUBE_VERSION
ETCD_VERSION=$ETCD_VERSION
KUBE_APISERVER=$KUBE_APISERVER
ETCD=$ETCD
EOF
  if ! start_apiserver; then
    stop_proc apiserver; stop_proc etcd
    die "kube-apiserver did not become ready"
  fi
  if [[ -n ${KUBE_OWNER_PID:-} ]]; then
    # Clean up if the owner (e.g. a pytest session) dies without calling stop.
    # shellcheck disable=SC2016  # $1..$3 are the inner script's arguments
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" stop "$3"' \
      kube-watchdog "$KUBE_OWNER_PID" "$SELF" "$DIR" </dev/null >>"$DIR/watchdog.log" 2>&1 &
    echo $! >"$DIR/watchdog.pid"
  fi
  log "kube-apiserver $KUBE_VERSION ready at $SERVER (etcd $ETCD_VERSION at $ETCD_ENDPOINT)"
  cat "$DIR/env"
}

cmd_stop() {
  need_dir "${1:-}"
  # A disposable test cluster: no graceful shutdown (saves ~5s per cluster).
  stop_proc apiserver KILL
  stop_proc etcd KILL
  # Kill the watchdog unless we are the watchdog.
  if [[ -f $DIR/watchdog.pid ]]; then
    local w; w="$(cat "$DIR/watchdog.pid")"
    if [[ $w != "$$" ]]; then kill "$w" 2>/dev/null || true; fi
    rm -f "$DIR/watchdog.pid"
  fi
}

cmd_restart_apiserver() {
  need_dir "${1:-}"
  load_env
  alive etcd || die "etcd is not running in $DIR"
  stop_proc apiserver
  start_apiserver || die "kube-apiserver did not become ready after restart"
  log "kube-apiserver restarted at $SERVER"
}

etcd_post() { curl -sf --max-time 10 -X POST "$ETCD_ENDPOINT/v3/$1" -d "$2"; }

cmd_compact() {
  need_dir "${1:-}"
  load_env
  alive etcd || die "etcd is not running in $DIR"
  # Range over a key that does not exist: the response header carries the current revision.
  local rev
  rev="$(etcd_post kv/range '{"key":"AA=="}' | sed -nE 's/.*"revision":"?([0-9]+)"?.*/\1/p')"
  [[ -n $rev ]] || die "cannot read the etcd revision from $ETCD_ENDPOINT"
  etcd_post kv/compaction "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null ||
    die "compaction to revision $rev failed"
  echo "$rev"
}

cmd_status() {
  need_dir "${1:-}"
  load_env
  cat "$DIR/env"
  local p
  for p in etcd apiserver watchdog; do
    if alive "$p"; then echo "${p^^}_PID=$(cat "$DIR/$p.pid")"; else echo "${p^^}_PID="; fi
  done
}

# All of the script is parsed before anything runs: editing this file while a long
# `install` is running does not break the running instance.
main() {
  CMD="${1:-}"
  shift || true
  case "$CMD" in
    install) cmd_install ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    restart-apiserver) cmd_restart_apiserver "$@" ;;
    compact) cmd_compact "$@" ;;
    status) cmd_status "$@" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}

main "$@"; exit $?
