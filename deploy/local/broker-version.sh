#!/usr/bin/env bash
# A single-node Apache Kafka broker of a chosen version (KRaft, one combined
# broker+controller, PLAINTEXT on loopback), side by side with services.sh's
# broker, for conformance runs against a broker-version matrix. No Docker.
# Run `deploy/local/broker-version.sh --help` for usage.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"

STATE_ROOT="${STREAMSCORE_STATE_DIR:-$REPO_ROOT/.local-services}"
[[ "$STATE_ROOT" == /* ]] || STATE_ROOT="$PWD/$STATE_ROOT"
CACHE_DIR="${STREAMSCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streamscore}"
HEAP_OPTS="${KAFKA_VERSION_HEAP_OPTS:--Xmx512m -Xms128m}"
JVM_OPTS="${KAFKA_VERSION_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
START_TIMEOUT="${KAFKA_VERSION_START_TIMEOUT:-120}"

# Logging jars added next to the broker's (its pom declares only slf4j-api 1.7):
# 4.x logs through log4j2 (the binding of deploy/local/pom.xml), 3.x through
# reload4j, as the 3.x distribution ships it.
LOG4J2_VERSION=2.24.3
RELOAD4J_VERSION=1.2.25
SLF4J_VERSION=1.7.36

MARKER_NAME=.streamscore-broker-version   # proves a folder is ours before rm -rf

log() { echo "broker-version: $*" >&2; }   # stdout is reserved for the export line
die() { echo "broker-version: ERROR: $*" >&2; exit 1; }

usage() {
  cat <<EOF
Usage: deploy/local/broker-version.sh {up|env|jars|reset} VERSION
       deploy/local/broker-version.sh down {VERSION|--all}
       deploy/local/broker-version.sh status [VERSION]
       deploy/local/broker-version.sh --help

One Apache Kafka broker of the given version (e.g. 4.4.0, 3.9.2), in KRaft mode
as a single combined broker+controller node, PLAINTEXT only, bound to 127.0.0.1,
run as a background JVM beside deploy/local/services.sh's broker (which it does
not touch). Meant for a conformance suite run against a broker-version matrix.
Versions from 3.3.0 on (KRaft); tried: 4.4.0 and 3.9.2.

  up VERSION     Resolve org.apache.kafka:kafka_2.13:VERSION and its runtime jars
                 from Maven Central with maven (once per version, cached), format
                 the node's storage on first use, start it if not running, wait
                 until it serves, then print on stdout:
                   export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:\$PORT
                 Progress goes to stderr: eval "\$(deploy/local/broker-version.sh up 4.4.0)"
                 Idempotent: a running broker is only reported.
  down VERSION   Stop that broker (SIGTERM, up to 30 s, then SIGKILL); ok if not running.
  down --all     Stop every broker this script started (under the state dir).
  status [VERSION]  One line per version set up here (or the one named).
  env VERSION    Print the export line only; starts nothing.
  jars VERSION   Resolve the jars (cached) and print their folder; starts nothing.
                 Clients can run from it: java -cp "\$(... jars 4.4.0)/*" Probe.java
  reset VERSION  down VERSION, then delete its state folder (topics, offsets, log).

Ports (127.0.0.1), derived from the version MAJOR.MINOR.PATCH:
  clients     20000 + 1000*MAJOR + 100*MINOR + 10*PATCH   (4.4.0: 24400, 3.9.2: 23920)
  controller  the same + 1                                  (4.4.0: 24401, 3.9.2: 23921)
  Two versions never share a port, and all lie in 23000-28991: clear of services.sh
  (19092-19095, Redis 16379/16380, registry 18081), cluster.sh (29092-29094,
  29192-29194) and the kernel's ephemeral range (32768 up). Versions with MINOR or
  PATCH above 9, or MAJOR above 8, need KAFKA_VERSION_PORT. The ports are fixed when
  the storage is formatted; to move a version to other ports, reset it first.

Quorum: Kafka 3.9 and later: a dynamic quorum (KIP-853), formatted with
  \`kafka-storage format --standalone\` and found via controller.quorum.bootstrap.servers;
  3.3-3.8: the static controller.quorum.voters=1@127.0.0.1:\$CONTROLLER_PORT.
Replication for a single node: default.replication.factor, min.insync.replicas,
  offsets/transaction state (and, where the version has them, share coordinator
  state) topics all 1; group.initial.rebalance.delay.ms=0.

Files, per version, in \$STREAMSCORE_STATE_DIR/kafka-VERSION:
  server.properties  the node's config, rewritten on each start
  kafka.log          the broker's log (kafka.log.1: the previous start's)
  log4j2.properties (4.x) or log4j.properties (3.x: reload4j, a FileAppender)
  data/  storage.properties (cluster id and the ports it was formatted for)  kafka.pid

Environment (default):
  KAFKA_VERSION_PORT (derived, see above)  client port; the controller's is +1
  KAFKA_VERSION_HEAP_OPTS (-Xmx512m -Xms128m)
  KAFKA_VERSION_JVM_OPTS (-XX:+UseSerialGC -XX:TieredStopAtLevel=1)
  KAFKA_VERSION_START_TIMEOUT (120 s)
  STREAMSCORE_STATE_DIR (<repo>/.local-services): the kafka-VERSION folders
  STREAMSCORE_CACHE_DIR (\${XDG_CACHE_HOME:-\$HOME/.cache}/streamscore): jars, in kafka-VERSION-HASH
EOF
}

# --- per-version names --------------------------------------------------------
VERSION="" MAJOR=0 MINOR=0 PATCH=0 DIR="" PROPS="" PID_FILE="" LOG="" STORAGE_FILE="" DATA=""
PORT="" CPORT=""

select_version() {
  [[ "${1:-}" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "VERSION must look like 4.4.0 or 3.9.2, not '${1:-}'"
  VERSION="$1"; MAJOR=$((10#${BASH_REMATCH[1]})); MINOR=$((10#${BASH_REMATCH[2]})); PATCH=$((10#${BASH_REMATCH[3]}))
  ((MAJOR > 3 || (MAJOR == 3 && MINOR >= 3))) || die "Kafka $VERSION predates production KRaft (3.3); this script runs no ZooKeeper"
  DIR="$STATE_ROOT/kafka-$VERSION"; DATA="$DIR/data"
  PROPS="$DIR/server.properties"; PID_FILE="$DIR/kafka.pid"; LOG="$DIR/kafka.log"
  STORAGE_FILE="$DIR/storage.properties"
  select_ports
}

dynamic_quorum() { ((MAJOR > 3 || MINOR >= 9)); }   # KIP-853: 3.9 and later

# The ports a formatted node was formatted for win; otherwise KAFKA_VERSION_PORT
# or the version's own (see --help).
select_ports() {
  local want="" stored=""
  if [[ -n "${KAFKA_VERSION_PORT:-}" ]]; then
    if ! [[ "$KAFKA_VERSION_PORT" =~ ^[0-9]+$ ]] || ((KAFKA_VERSION_PORT < 1024 || KAFKA_VERSION_PORT > 65534)); then
      die "KAFKA_VERSION_PORT must be a port number from 1024 to 65534"
    fi
    want="$KAFKA_VERSION_PORT"
  elif ((MAJOR <= 8 && MINOR <= 9 && PATCH <= 9)); then
    want=$((20000 + 1000 * MAJOR + 100 * MINOR + 10 * PATCH))
  fi
  [[ -f "$STORAGE_FILE" ]] && stored="$(sed -n 's/^port=//p' "$STORAGE_FILE")"
  if [[ -n "$stored" ]]; then
    if [[ -n "${KAFKA_VERSION_PORT:-}" && "$KAFKA_VERSION_PORT" != "$stored" ]]; then
      die "Kafka $VERSION's storage in $DIR was formatted for port $stored, not KAFKA_VERSION_PORT=$KAFKA_VERSION_PORT; unset it, or run: $0 reset $VERSION"
    fi
    want="$stored"
  fi
  [[ -n "$want" ]] || die "no port derived for Kafka $VERSION (MAJOR above 8, or MINOR/PATCH above 9): set KAFKA_VERSION_PORT"
  PORT="$want"; CPORT=$((want + 1))
}

print_env() { echo "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$PORT"; }

# --- small helpers ------------------------------------------------------------
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# The pid in the file runs and is this version's JVM: its command line names
# kafka.Kafka with this version's server.properties (guards a recycled pid,
# and services.sh's or cluster.sh's brokers).
kafka_alive() {
  local pid; [[ -s "$PID_FILE" ]] || return 1
  pid="$(cat "$PID_FILE")"; [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "kafka.Kafka $PROPS"
}

show_log() { log "last lines of $1:"; tail -n 60 "$1" >&2 2>/dev/null || true; }

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }

ensure_prereqs() {
  if ! command -v java >/dev/null || (( $(java_major || echo 0) < 17 )); then
    die "needs java 17+ on PATH (deploy/local/services.sh up installs it; or: apt-get install openjdk-17-jre-headless)"
  fi
  command -v mvn >/dev/null || die "needs maven on PATH (deploy/local/services.sh up installs it; or: apt-get install maven)"
}

lock() {
  mkdir -p "$DIR"; touch "$DIR/$MARKER_NAME"; exec 9>"$DIR/.lock"
  flock -n 9 && return 0
  log "waiting for another broker-version.sh on $VERSION (lock $DIR/.lock)"
  flock -w 300 9 || die "another broker-version.sh still holds $DIR/.lock after 300 s"
}

# --- jars -----------------------------------------------------------------------
# The pom for one version: the broker, and the logging its version expects.
write_pom() {
  local logging
  if ((MAJOR >= 4)); then
    logging="    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J2_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J2_VERSION</version></dependency>"
  else
    logging="    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>ch.qos.reload4j</groupId><artifactId>reload4j</artifactId><version>$RELOAD4J_VERSION</version></dependency>"
  fi
  cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by deploy/local/broker-version.sh: the runtime jars of one Kafka broker version. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streamscore.local</groupId>
  <artifactId>kafka-broker-jars-$VERSION</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
$logging
  </dependencies>
</project>
EOF
}

# Once per version and pom content, into a temp folder renamed into place whole
# (as services.sh's ensure_jars), so a half-finished download is never used.
KAFKA_LIBS=""
ensure_jars() {
  local pom hash dir tmp why
  pom="$(write_pom)"; hash="$(sha256sum <<<"$pom" | cut -c1-16)"
  dir="$CACHE_DIR/kafka-$VERSION-$hash"; KAFKA_LIBS="$dir/libs"
  [[ -d "$KAFKA_LIBS" ]] && return 0
  log "resolving Kafka $VERSION's jars with maven into $dir (first run only)"
  mkdir -p "$CACHE_DIR"
  find "$CACHE_DIR" -maxdepth 1 -name ".kafka-$VERSION-*" -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  tmp="$(mktemp -d "$CACHE_DIR/.kafka-$VERSION-$hash.XXXXXX")"; chmod 755 "$tmp"
  printf '%s\n' "$pom" >"$tmp/pom.xml"
  if ! mvn -B -f "$tmp/pom.xml" dependency:copy-dependencies \
       -DoutputDirectory="$tmp/libs" -DincludeScope=runtime >"$tmp/mvn.log" 2>&1; then
    why="$(grep -m1 -E 'Could not (find|transfer|resolve)|status code|[0-9]{3} (Forbidden|Not Found|Unauthorized)' "$tmp/mvn.log" || true)"
    tail -n 40 "$tmp/mvn.log" >&2; rm -rf "$tmp"
    die "maven could not resolve org.apache.kafka:kafka_2.13:$VERSION${why:+: $why}"
  fi
  compgen -G "$tmp/libs/kafka_2.13-$VERSION.jar" >/dev/null || { rm -rf "$tmp"; die "maven resolved no kafka_2.13-$VERSION.jar"; }
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"   # -T: a concurrent run may have put it in place
  [[ -d "$KAFKA_LIBS" ]] || die "jar cache $KAFKA_LIBS missing after download"
}

# --- config -------------------------------------------------------------------
# Loggers only at WARN (the chatty ones); the rest at INFO, so the broker's
# "Kafka Server started" line, which readiness waits for, stays in.
QUIET_LOGGERS=(kafka.request.logger 'kafka.network.RequestChannel$' state.change.logger
  kafka.server.KafkaConfig kafka.log kafka.cluster kafka.coordinator kafka.server.metadata
  org.apache.kafka.raft org.apache.kafka.controller org.apache.kafka.metadata org.apache.kafka.image
  org.apache.kafka.storage org.apache.kafka.coordinator org.apache.kafka.common.config
  org.apache.kafka.common.utils.AppInfoParser kafka.server.ReplicaFetcherManager
  kafka.server.ReplicaAlterLogDirsManager kafka.server.ClientQuotaManager)

# The JVM flag that points the version's logging at its config.
LOG_FLAG=""
write_log_config() {
  if ((MAJOR >= 4)); then
    # log4j2: to the console, which the start sends to kafka.log.
    "$SCRIPT_DIR/kafka-log4j2.sh" "${QUIET_LOGGERS[@]}" >"$DIR/log4j2.properties"
    LOG_FLAG="-Dlog4j2.configurationFile=$DIR/log4j2.properties"
  else
    # 3.x: log4j 1.x API (reload4j); a FileAppender straight into kafka.log (the
    # JVM's own stdout/stderr are appended there too, both in append mode).
    local name esc="${LOG//\\/\\\\}"
    {
      echo "# Generated by deploy/local/broker-version.sh on each start; edits are overwritten."
      echo "log4j.rootLogger=INFO, file"
      echo "log4j.appender.file=org.apache.log4j.FileAppender"
      echo "log4j.appender.file.File=$esc"
      echo "log4j.appender.file.Append=true"
      echo "log4j.appender.file.layout=org.apache.log4j.PatternLayout"
      echo "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n"
      for name in "${QUIET_LOGGERS[@]}"; do echo "log4j.logger.$name=WARN"; done
    } >"$DIR/log4j.properties"
    LOG_FLAG="-Dlog4j.configuration=file:$DIR/log4j.properties"
  fi
}

# Share groups (KIP-932) came with 4.0; only versions with the share
# coordinator's jar get its internal topic's settings.
has_share_coordinator() { compgen -G "$KAFKA_LIBS/kafka-share-coordinator-*.jar" >/dev/null; }

write_kafka_config() {
  local quorum
  if dynamic_quorum; then quorum="controller.quorum.bootstrap.servers=127.0.0.1:$CPORT"
  else quorum="controller.quorum.voters=1@127.0.0.1:$CPORT"; fi
  {
    cat <<EOF
# Generated by deploy/local/broker-version.sh (Kafka $VERSION) on each start; edits are overwritten.
process.roles=broker,controller
node.id=1
$quorum
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
num.partitions=1
auto.create.topics.enable=true
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
# Small: fewer threads, a side broker on a small machine.
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
EOF
    if has_share_coordinator; then
      printf 'share.coordinator.state.topic.replication.factor=1\nshare.coordinator.state.topic.min.isr=1\n'
    fi
  } >"$PROPS"
  write_log_config
}

java_tool() { java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp "$KAFKA_LIBS/*" "$LOG_FLAG" "$@"; }

format_storage() {
  [[ -f "$DATA/meta.properties" ]] && return 0
  local uuid
  uuid="$(java_tool kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
  [[ "$uuid" =~ ^[A-Za-z0-9_-]{22}$ ]] || { show_log "$LOG"; die "kafka.tools.StorageTool random-uuid gave no cluster id ('$uuid')"; }
  log "formatting Kafka $VERSION's storage (cluster id $uuid$(dynamic_quorum && echo ', --standalone'))"
  rm -rf "$DATA"
  local args=(format -t "$uuid" -c "$PROPS")
  if dynamic_quorum; then args+=(--standalone); fi
  if ! java_tool kafka.tools.StorageTool "${args[@]}" >>"$LOG" 2>&1; then
    rm -rf "$DATA"; show_log "$LOG"; die "kafka-storage format failed for Kafka $VERSION"
  fi
  printf 'cluster.id=%s\nport=%s\ncontroller.port=%s\nquorum=%s\n' "$uuid" "$PORT" "$CPORT" \
    "$(dynamic_quorum && echo dynamic || echo static)" >"$STORAGE_FILE"
}

# --- start / stop ---------------------------------------------------------------
ready() { port_open "$PORT" && port_open "$CPORT" && grep -q 'Kafka Server started' "$LOG" 2>/dev/null; }

# Ready = our process is alive, both ports answer and the log says so. On a
# timeout the half-started broker is stopped, so the next `up` starts clean.
wait_kafka() {
  local pid deadline=$((SECONDS + START_TIMEOUT)); pid="$(cat "$PID_FILE")"
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || { show_log "$LOG"; rm -f "$PID_FILE"; die "Kafka $VERSION exited during startup (stale data? try: $0 reset $VERSION)"; }
    ready && return 0
    sleep 0.5
  done
  show_log "$LOG"; stop_kafka
  die "Kafka $VERSION not ready after ${START_TIMEOUT}s (log: $LOG)"
}

start_kafka() {
  local t0=$SECONDS p
  if kafka_alive; then
    if ready; then log "Kafka $VERSION already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$PORT (controller :$CPORT)"; return 0; fi
    log "Kafka $VERSION (pid $(cat "$PID_FILE")) is still starting, waiting"; wait_kafka; return 0
  fi
  rm -f "$PID_FILE"
  for p in "$PORT" "$CPORT"; do
    port_open "$p" && die "127.0.0.1:$p is in use by a process this script did not start (no live $PID_FILE); stop it or set KAFKA_VERSION_PORT (and reset $VERSION)"
  done
  ensure_jars; write_kafka_config
  [[ -f "$LOG" ]] && mv -f "$LOG" "$LOG.1"   # keep one old log; readiness greps a fresh one
  format_storage
  log "starting Kafka $VERSION on 127.0.0.1:$PORT (controller :$CPORT)"
  # setsid + nohup: the broker outlives this shell; both exec, so $! is the JVM.
  # shellcheck disable=SC2086  # HEAP_OPTS and JVM_OPTS are deliberately word-split
  nohup setsid java $HEAP_OPTS $JVM_OPTS -Djava.awt.headless=true "$LOG_FLAG" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$PROPS" </dev/null >>"$LOG" 2>&1 9>&- &
  echo $! >"$PID_FILE"
  wait_kafka
  log "Kafka $VERSION ready (pid $(cat "$PID_FILE"), $((SECONDS - t0)) s)"
}

# SIGTERM, up to 30 s, then SIGKILL.
stop_kafka() {
  if ! kafka_alive; then rm -f "$PID_FILE"; log "Kafka $VERSION not running"; return 0; fi
  local pid i; pid="$(cat "$PID_FILE")"
  log "stopping Kafka $VERSION (pid $pid)"; kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 60; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then log "Kafka $VERSION ignored SIGTERM for 30 s, sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
  rm -f "$PID_FILE"
}

status_line() {
  if kafka_alive; then
    if ready; then echo "kafka $VERSION: running (pid $(cat "$PID_FILE")) at 127.0.0.1:$PORT (controller :$CPORT)"
    else echo "kafka $VERSION: process up (pid $(cat "$PID_FILE")) but not serving yet at 127.0.0.1:$PORT"; fi
  elif port_open "$PORT"; then echo "kafka $VERSION: not ours, but 127.0.0.1:$PORT is in use by another process"
  else echo "kafka $VERSION: stopped (would use 127.0.0.1:$PORT, controller :$CPORT)"; fi
}

# The versions set up under the state dir (folders with our marker).
known_versions() {
  local d
  for d in "$STATE_ROOT"/kafka-*/; do
    [[ -f "$d$MARKER_NAME" ]] || continue
    d="${d%/}"; echo "${d##*/kafka-}"
  done
}

need_version() { [[ $# -eq 1 ]] || { usage >&2; exit 2; }; select_version "$1"; }

case "${1:-}" in
  up)     need_version "${@:2}"; ensure_prereqs; lock; start_kafka; print_env ;;
  down)   [[ $# -eq 2 ]] || { usage >&2; exit 2; }
          if [[ "$2" == --all ]]; then
            found=0
            for v in $(known_versions); do found=1; select_version "$v"; lock; stop_kafka; done
            ((found)) || log "nothing to stop"
          else
            select_version "$2"
            [[ -d "$DIR" ]] || { log "nothing to stop for $VERSION"; exit 0; }
            lock; stop_kafka
          fi ;;
  status) if [[ $# -ge 2 ]]; then need_version "${@:2}"; status_line
          else
            found=0
            for v in $(known_versions); do found=1; select_version "$v"; status_line; done
            ((found)) || echo "no broker version set up under $STATE_ROOT"
          fi ;;
  env)    need_version "${@:2}"; print_env ;;
  jars)   need_version "${@:2}"; ensure_prereqs; ensure_jars; echo "$KAFKA_LIBS" ;;
  reset)  need_version "${@:2}"
          if [[ -d "$DIR" ]]; then
            [[ -f "$DIR/$MARKER_NAME" ]] || die "$DIR has no $MARKER_NAME; not deleting it"
            lock; stop_kafka
            rm -rf "$DIR"; log "removed $DIR"
          else log "nothing to reset for $VERSION"; fi ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
