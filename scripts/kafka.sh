#!/usr/bin/env bash
# A real single-node Apache Kafka (KRaft: one process acting as broker and
# controller) for tests and CI. No Docker, no tarball download: the broker jars
# are resolved by Maven from tools/kafka/pom.xml into the local Maven
# repository, and the broker runs as `java -cp <classpath> kafka.Kafka`.
#
# Usage:
#   scripts/kafka.sh install                  resolve jars, cache the classpath
#   scripts/kafka.sh start [PORT] [DATA_DIR]  format (first time) + start, wait
#                                             until ready, print "127.0.0.1:PORT"
#   scripts/kafka.sh stop  [DATA_DIR]         clean shutdown (SIGTERM, then SIGKILL)
#   scripts/kafka.sh kill  [DATA_DIR]         SIGKILL, for crash tests
#   scripts/kafka.sh status [DATA_DIR]        exit 0 and print bootstrap if running
#   scripts/kafka.sh logs  [DATA_DIR]         print the tail of the broker logs
#
# Defaults: PORT=9092, DATA_DIR=$KUEUE_ES_CACHE/kafka/data-$PORT (stop/kill/
# status/logs without DATA_DIR use the data dir of the default port 9092).
# The broker listens on 127.0.0.1 only. A data dir can be stopped and started
# again (broker-restart tests): it keeps its ports, cluster id and logs.
#
# Environment:
#   KUEUE_ES_CACHE          cache root (default ~/.cache/kueue-es); the
#                           classpath lives in $KUEUE_ES_CACHE/kafka/
#   KAFKA_MVN_ARGS          extra arguments for mvn (e.g. -s settings.xml)
#   KAFKA_HEAP_OPTS         default "-Xms256m -Xmx512m"
#   KAFKA_JVM_OPTS          extra JVM options
#   KAFKA_CONTROLLER_PORT   controller listener port for a new data dir
#                           (default: a free loopback port)
#   KAFKA_EXTRA_PROPERTIES  extra server.properties lines, appended last (they
#                           override this script's defaults)
#   KAFKA_CDS               0 disables the class-data-sharing archive that
#                           speeds up JVM startup (kept in the cache dir)
#   KAFKA_START_TIMEOUT     seconds to wait for readiness (default 90)
#   KAFKA_STOP_TIMEOUT      seconds to wait for a clean shutdown (default 30)
#   KAFKA_WATCH_PID         if set, the broker is killed when that process
#                           exits (the pytest fixture passes its own pid)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/tools/kafka"
POM="$TOOLS/pom.xml"
LOG4J_CONF="$TOOLS/log4j2.properties"
CACHE="${KUEUE_ES_CACHE:-$HOME/.cache/kueue-es}/kafka"
CP_FILE="$CACHE/classpath.txt"
STAMP_FILE="$CACHE/classpath.stamp"
# Fixed cluster id (base64url of the 16 bytes "kueue-es-kafka-1").
CLUSTER_ID="a3VldWUtZXMta2Fma2EtMQ"
DEFAULT_PORT=9092

log() { echo "kafka.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH ($2)"; }

pom_stamp() {
    # The cached classpath is valid for this exact pom (kafka version etc.).
    sha256sum <"$POM" | cut -d' ' -f1
}

classpath_valid() {
    [[ -s "$CP_FILE" && -f "$STAMP_FILE" ]] || return 1
    [[ "$(cat "$STAMP_FILE")" == "$(pom_stamp)" ]] || return 1
    local jar
    local -a jars
    IFS=: read -r -a jars <"$CP_FILE"
    for jar in "${jars[@]}"; do
        [[ -f "$jar" ]] || return 1
    done
    return 0
}

cmd_install() {
    mkdir -p "$CACHE"
    if classpath_valid; then
        echo "$CP_FILE"
        return 0
    fi
    need mvn "install Maven 3.8+ to resolve the Kafka jars"
    need java "install a Java 17+ runtime"
    (
        # Serialize concurrent installs (e.g. several CI jobs sharing a cache).
        if command -v flock >/dev/null 2>&1; then
            exec 9>"$CACHE/install.lock"
            flock 9
        fi
        classpath_valid && exit 0
        local tmp="$CP_FILE.tmp.$$"
        local -a args=(-B -q -Dstyle.color=never -f "$POM" dependency:build-classpath
            "-Dmdep.outputFile=$tmp" -Dmdep.includeScope=runtime)
        # shellcheck disable=SC2206
        local -a extra=(${KAFKA_MVN_ARGS:-})
        log "resolving Kafka jars with Maven ($POM)"
        # Offline first: when the jars are already in the local Maven
        # repository this needs no network at all.
        local mvn_log="$CACHE/mvn.log"
        if ! mvn -o "${args[@]}" "${extra[@]}" >"$mvn_log" 2>&1; then
            if ! mvn "${args[@]}" "${extra[@]}" >"$mvn_log" 2>&1; then
                cat "$mvn_log" >&2
                die "mvn dependency:build-classpath failed (log: $mvn_log)"
            fi
        fi
        [[ -s "$tmp" ]] || die "mvn wrote no classpath"
        grep -q 'kafka_2\.13-' "$tmp" || die "resolved classpath lacks kafka_2.13"
        mv "$tmp" "$CP_FILE"
        pom_stamp >"$STAMP_FILE"
    )
    classpath_valid || die "classpath cache is invalid after install"
    echo "$CP_FILE"
}

# --- process helpers -------------------------------------------------------

port_open() {  # port_open PORT -> 0 if something accepts TCP connections
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
    else
        local p
        for p in $(seq 29093 29193); do
            port_open "$p" || { echo "$p"; return 0; }
        done
        die "no free port found for the controller listener"
    fi
}

broker_pid() {  # broker_pid DATA_DIR -> prints pid if our broker is running
    local dir="$1" pid
    [[ -f "$dir/kafka.pid" ]] || return 1
    pid="$(cat "$dir/kafka.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # Guard against a recycled pid: it must be a kafka.Kafka on this data dir.
    if [[ -r "/proc/$pid/cmdline" ]]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kafka.Kafka $dir/server.properties" || return 1
    fi
    echo "$pid"
}

cds_archive() {
    # One archive per classpath and JVM (an archive only maps into the JVM
    # and classpath that wrote it; a stale one is ignored with a warning).
    local key
    key="$( (cat "$STAMP_FILE" 2>/dev/null; readlink -f "$(command -v java)") | sha256sum | cut -c1-16)"
    echo "$CACHE/kafka-cds-$key.jsa"
}

publish_cds() {  # publish_cds PID: keep the archive dumped by that JVM, if any
    local jsa dump
    jsa="$(cds_archive)"
    dump="$jsa.dump.$1"
    if [[ -s "$dump" && ! -s "$jsa" ]]; then
        mv -f "$dump" "$jsa"
    fi
    rm -f "$dump"
}

default_data_dir() { echo "$CACHE/data-${1:-$DEFAULT_PORT}"; }

abs_dir() { mkdir -p "$1" && (cd "$1" && pwd); }

show_logs() {
    local dir="$1"
    local f
    for f in "$dir/logs/kafka.out" "$dir/logs/format.out" "$dir/logs/server.log"; do
        if [[ -s "$f" ]]; then
            echo "----- $f (tail) -----" >&2
            tail -n 40 "$f" >&2
        fi
    done
}

write_properties() {
    local dir="$1" port="$2" cport="$3"
    cat >"$dir/server.properties" <<EOF
# Generated by scripts/kafka.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/kraft

# Single node: every internal topic has replication factor 1.
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1

# Tests create their topics explicitly and want fast group joins.
auto.create.topics.enable=false
delete.topic.enable=true
group.initial.rebalance.delay.ms=0

# The event log is the source of truth: never expire records by time, and
# accept record timestamps from simulated clocks (past or future).
log.retention.ms=-1
log.message.timestamp.before.max.ms=9223372036854775807
log.message.timestamp.after.max.ms=9223372036854775807

# After a crash (kill -9) the restarted node can only re-register once the
# controller has expired the dead incarnation's session (default 9 s).
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=500

num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
${KAFKA_EXTRA_PROPERTIES:-}
EOF
}

cmd_start() {
    local port="${1:-$DEFAULT_PORT}"
    [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
    local dir
    dir="$(abs_dir "${2:-$(default_data_dir "$port")}")"
    need java "install a Java 17+ runtime"
    local cp_file
    cp_file="$(cmd_install)"
    local cp
    cp="$(cat "$cp_file")"

    local pid
    if pid="$(broker_pid "$dir")"; then
        if [[ "$(cat "$dir/port" 2>/dev/null)" == "$port" ]]; then
            log "already running (pid $pid, data dir $dir)"
            echo "127.0.0.1:$port"
            return 0
        fi
        die "a broker on another port ($(cat "$dir/port" 2>/dev/null)) already uses $dir"
    fi
    rm -f "$dir/kafka.pid"
    # A broker just stopped or killed may still hold its listener for a moment (a JVM's exit takes a while on a
    # busy machine): wait for the port before calling it taken.
    local free_by=$((SECONDS + ${KAFKA_PORT_WAIT:-30}))
    while port_open "$port"; do
        ((SECONDS < free_by)) || die "port $port on 127.0.0.1 is already in use"
        sleep 0.2
    done

    # The controller port is chosen once per data dir and then reused, so a
    # restarted node keeps the same quorum address.
    local cport
    if [[ -s "$dir/controller.port" ]]; then
        cport="$(cat "$dir/controller.port")"
    else
        cport="${KAFKA_CONTROLLER_PORT:-$(free_port)}"
        echo "$cport" >"$dir/controller.port"
    fi
    [[ "$cport" != "$port" ]] || die "controller port equals broker port ($port)"
    port_open "$cport" && die "controller port $cport on 127.0.0.1 is already in use"
    echo "$port" >"$dir/port"

    mkdir -p "$dir/logs" "$dir/kraft"
    write_properties "$dir" "$port" "$cport"
    # Keep the previous run's logs for post-mortems; start fresh ones.
    local f
    for f in server.log kafka.out; do
        [[ -f "$dir/logs/$f" ]] && mv -f "$dir/logs/$f" "$dir/logs/$f.prev"
    done

    # shellcheck disable=SC2206
    local -a jvm=(${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}
        -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError
        -Djava.awt.headless=true
        "-Dlog4j2.configurationFile=$LOG4J_CONF" "-Dkafka.logs.dir=$dir/logs"
        # GC pauses with wall-clock times, as Kafka's own start scripts log them (benchmarks/kafka_e2e.py
        # reads them to tell the broker's pauses from the rest of a latency's tail)
        "-Xlog:gc:file=$dir/logs/gc.log:time,uptime:filecount=4,filesize=20M"
        ${KAFKA_JVM_OPTS:-})

    if [[ ! -f "$dir/kraft/meta.properties" ]]; then
        java "${jvm[@]}" -cp "$cp" kafka.tools.StorageTool format \
            -t "$CLUSTER_ID" -c "$dir/server.properties" --ignore-formatted \
            >"$dir/logs/format.out" 2>&1 || { show_logs "$dir"; die "storage format failed"; }
    fi

    # Class data sharing: the first broker that stops cleanly dumps the
    # classes it loaded into an archive that later starts map directly (about
    # a third faster JVM startup). `exec` keeps the pid, so the dump file
    # name is known to cmd_stop, which publishes it atomically.
    local cds_opt="" jsa
    jsa="$(cds_archive)"
    if [[ "${KAFKA_CDS:-1}" != 0 ]]; then
        if [[ -s "$jsa" ]]; then
            cds_opt="-XX:SharedArchiveFile=$jsa"
        else
            cds_opt="-XX:ArchiveClassesAtExit=$jsa.dump.@JVMPID@"
        fi
    fi

    # Detached from our stdin/stdout/stderr so callers capturing our output
    # (subprocess.run) see EOF as soon as this script exits.
    # shellcheck disable=SC2016  # expanded by the inner bash, on purpose
    nohup bash -c 'o="${1//@JVMPID@/$$}"; shift; exec java ${o:+"$o"} "$@"' kafka-java "$cds_opt" "${jvm[@]}" \
        -cp "$cp" kafka.Kafka "$dir/server.properties" \
        </dev/null >"$dir/logs/kafka.out" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/kafka.pid"

    if [[ -n "${KAFKA_WATCH_PID:-}" ]]; then
        local watch="$KAFKA_WATCH_PID"
        # shellcheck disable=SC2016  # expanded by the inner bash, on purpose
        nohup bash -c '
            while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
            kill -0 "$2" 2>/dev/null && kill -9 "$2" 2>/dev/null
            exit 0' kafka-watch "$watch" "$pid" </dev/null >/dev/null 2>&1 &
    fi

    local timeout="${KAFKA_START_TIMEOUT:-90}"
    local deadline=$((SECONDS + timeout))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/kafka.pid"
            show_logs "$dir"
            die "broker exited during startup"
        fi
        if grep -q "Kafka Server started" "$dir/logs/server.log" 2>/dev/null && port_open "$port"; then
            break
        fi
        if ((SECONDS >= deadline)); then
            show_logs "$dir"
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$dir/kafka.pid"
            die "broker not ready after ${timeout}s"
        fi
        sleep 0.1
    done
    log "broker ready (pid $pid, data dir $dir)"
    echo "127.0.0.1:$port"
}

stop_with() {  # stop_with SIGNAL DATA_DIR
    local sig="$1" dir="$2" pid
    if ! pid="$(broker_pid "$dir")"; then
        rm -f "$dir/kafka.pid"
        log "not running ($dir)"
        return 0
    fi
    kill "-$sig" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + ${KAFKA_STOP_TIMEOUT:-30}))
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            log "no clean shutdown after ${KAFKA_STOP_TIMEOUT:-30}s; killing $pid"
            kill -9 "$pid" 2>/dev/null || true
            deadline=$((SECONDS + 10))
        fi
        sleep 0.1
    done
    rm -f "$dir/kafka.pid"
    publish_cds "$pid"
    log "stopped (pid $pid, $sig)"
}

resolve_dir() {  # existing data dir from argument or default
    local dir="${1:-$(default_data_dir)}"
    [[ -d "$dir" ]] || { echo "$dir"; return 0; }
    (cd "$dir" && pwd)
}

cmd_stop() { stop_with TERM "$(resolve_dir "${1:-}")"; }
cmd_kill() { stop_with KILL "$(resolve_dir "${1:-}")"; }

cmd_status() {
    local dir pid
    dir="$(resolve_dir "${1:-}")"
    if pid="$(broker_pid "$dir")"; then
        log "running (pid $pid, data dir $dir)"
        echo "127.0.0.1:$(cat "$dir/port")"
        return 0
    fi
    log "not running ($dir)"
    return 1
}

cmd_logs() { show_logs "$(resolve_dir "${1:-}")" 2>&1; }

usage() {
    local code="${1:-2}"
    if ((code == 0)); then
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    else
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    fi
    exit "$code"
}

case "${1:-}" in
    install) shift; cmd_install "$@" ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    kill) shift; cmd_kill "$@" ;;
    status) shift; cmd_status "$@" ;;
    logs) shift; cmd_logs "$@" ;;
    -h | --help | help) usage 0 ;;
    *) usage 2 ;;
esac
