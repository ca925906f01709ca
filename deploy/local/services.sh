#!/usr/bin/env bash
# Local Kafka (KRaft, single node) + Redis for streamscore development and tests,
# without Docker. Run `deploy/local/services.sh --help` for usage.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
POM="$SCRIPT_DIR/pom.xml"

KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
REDIS_PORT="${REDIS_PORT:-16379}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
REDIS_START_TIMEOUT="${REDIS_START_TIMEOUT:-20}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
STATE_DIR="${STREAMSCORE_STATE_DIR:-$REPO_ROOT/.local-services}"
CACHE_DIR="${STREAMSCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streamscore}"

KAFKA_PID="$STATE_DIR/kafka.pid";  KAFKA_LOG="$STATE_DIR/kafka.log"
REDIS_PID="$STATE_DIR/redis.pid";  REDIS_LOG="$STATE_DIR/redis.log"
KAFKA_DATA="$STATE_DIR/kafka-data"; KAFKA_PROPS="$STATE_DIR/server.properties"
MARKER="$STATE_DIR/.streamscore-state"   # lets `reset` prove the dir is ours before rm -rf

log() { echo "services: $*" >&2; }   # stdout is reserved for the export lines
die() { echo "services: ERROR: $*" >&2; exit 1; }

usage() {
  cat <<EOF
Usage: deploy/local/services.sh {up|down|status|env|reset|--help}
       deploy/local/services.sh {stop-kafka|start-kafka|stop-redis|start-redis}

Local Apache Kafka 4.x broker (KRaft, one broker+controller node) and Redis,
both bound to 127.0.0.1, run as plain background processes (no Docker).

  up      Install missing prerequisites (java 17+, maven, redis-server via apt),
          fetch the broker jars (cached), start Kafka and Redis if not running,
          wait until both answer, then print on stdout:
            export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:\$KAFKA_PORT
            export REDIS_URL=redis://127.0.0.1:\$REDIS_PORT/0
          Progress goes to stderr, so:  eval "\$(deploy/local/services.sh up)"
          Idempotent: running services are only reported.
  down    Stop both (SIGTERM, up to 30 s, then SIGKILL); ok if nothing runs.
  status  Say whether each service runs, and where.
  env     Print only the two export lines above.
  reset   down, then delete the state dir (topics, offsets, logs). Use it when
          the broker will not start from old data (e.g. after changing ports).

  stop-kafka, stop-redis    Stop one service as \`down\` does; the other keeps running.
  start-kafka, start-redis  Start one service as \`up\` does (waits until it answers),
          with its data as it was left (Redis keeps nothing: it runs without
          persistence). For fault injection, e.g. the chaos suite (tests/chaos).

Environment (default):
  KAFKA_PORT (19092)  KAFKA_CONTROLLER_PORT (19093)  REDIS_PORT (16379)
  KAFKA_START_TIMEOUT (90 s)  REDIS_START_TIMEOUT (20 s)
  KAFKA_HEAP_OPTS (-Xmx512m -Xms256m)
  STREAMSCORE_STATE_DIR (<repo>/.local-services): data, logs, pid files, configs
  STREAMSCORE_CACHE_DIR (\${XDG_CACHE_HOME:-\$HOME/.cache}/streamscore): broker jars
EOF
}

print_env() {
  echo "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT"
  echo "export REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0"
}

# --- small helpers ----------------------------------------------------------
# bash's /dev/tcp: no dependency on nc/ss.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# pid_alive FILE PATTERN: the pid in FILE runs and its command line matches
# PATTERN (guards against a recycled pid after a reboot or crash).
pid_alive() {
  local pid; [[ -s "$1" ]] || return 1
  pid="$(cat "$1")"; [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}
kafka_alive() { pid_alive "$KAFKA_PID" 'kafka\.Kafka'; }
redis_alive() { pid_alive "$REDIS_PID" 'redis-server'; }

show_log() { log "last lines of $1:"; tail -n 60 "$1" >&2 2>/dev/null || true; }

ensure_state_dir() { mkdir -p "$STATE_DIR"; touch "$MARKER"; }

# --- prerequisites ----------------------------------------------------------
APT_UPDATED=0
apt_install() {
  local sudo=()
  if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || die "need root or sudo to apt-get install $*"
    sudo=(sudo)
  fi
  # Another apt may hold the lock (e.g. a provisioning step): poll, don't fail.
  local tries=0 out
  until out="$( ( ((APT_UPDATED)) || "${sudo[@]}" apt-get update -q ) 2>&1 &&
               "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
                 apt-get install -y -q -o DPkg::Lock::Timeout=300 "$@" 2>&1)"; do
    if ! grep -qi 'lock' <<<"$out" || ((tries++ >= 60)); then echo "$out" >&2; die "apt-get install $* failed"; fi
    log "apt is locked by another process, waiting..."; sleep 5
  done
  APT_UPDATED=1
}

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }

ensure_prereqs() {
  if ! command -v java >/dev/null || (( $(java_major || echo 0) < 17 )); then
    log "installing Java 17"; apt_install openjdk-17-jre-headless
  fi
  command -v mvn >/dev/null || { log "installing maven"; apt_install maven; }
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    log "installing redis"; apt_install redis-server   # redis-cli comes with it
  fi
}

# Resolve the broker jars once per pom.xml content. Download into a temp dir
# and rename it into place, so a half-finished download is never used.
KAFKA_LIBS=""
ensure_jars() {
  local hash dir tmp
  hash="$(sha256sum "$POM" | cut -c1-16)"
  dir="$CACHE_DIR/kafka-$hash"; KAFKA_LIBS="$dir/libs"
  [[ -d "$KAFKA_LIBS" ]] && return 0
  log "resolving Kafka jars with maven into $dir (first run only)"
  mkdir -p "$CACHE_DIR"
  # Leftovers of interrupted downloads (an hour old: surely not in progress).
  find "$CACHE_DIR" -maxdepth 1 -name '.kafka-*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  tmp="$(mktemp -d "$CACHE_DIR/.kafka-$hash.XXXXXX")"; chmod 755 "$tmp"
  if ! mvn -q -B -f "$POM" dependency:copy-dependencies \
       -DoutputDirectory="$tmp/libs" -DincludeScope=runtime >"$tmp/mvn.log" 2>&1; then
    tail -n 60 "$tmp/mvn.log" >&2; rm -rf "$tmp"; die "maven could not resolve $POM"
  fi
  # -T: fail rather than nest if a concurrent run already put it in place.
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
  [[ -d "$KAFKA_LIBS" ]] || die "jar cache $KAFKA_LIBS missing after download"
}

# --- Kafka ------------------------------------------------------------------
write_kafka_config() {
  cat >"$KAFKA_PROPS" <<EOF
# Generated by deploy/local/services.sh on each start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DATA
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
EOF
  # INFO to the console (-> kafka.log), but the chatty loggers only at WARN.
  cat >"$STATE_DIR/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
EOF
  local i=0 name
  for name in kafka.request.logger 'kafka.network.RequestChannel$' state.change.logger \
      kafka.server.KafkaConfig kafka.log kafka.cluster kafka.coordinator \
      org.apache.kafka.raft org.apache.kafka.controller org.apache.kafka.metadata \
      org.apache.kafka.image org.apache.kafka.storage org.apache.kafka.coordinator \
      org.apache.kafka.common.config org.apache.kafka.common.utils.AppInfoParser \
      org.apache.kafka.server kafka.server.metadata kafka.server.ReplicaFetcherManager \
      kafka.server.ReplicaAlterLogDirsManager kafka.server.ClientQuotaManager; do
    i=$((i + 1))
    printf 'logger.q%d.name = %s\nlogger.q%d.level = WARN\n' "$i" "$name" "$i" \
      >>"$STATE_DIR/log4j2.properties"
  done
}

format_kafka_storage() {
  [[ -f "$KAFKA_DATA/meta.properties" ]] && return 0
  local uuid
  uuid="$(java -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
  log "formatting Kafka storage (cluster id $uuid)"
  java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$STATE_DIR/log4j2.properties" \
    kafka.tools.StorageTool format --standalone -t "$uuid" -c "$KAFKA_PROPS" >>"$KAFKA_LOG" 2>&1 ||
    { show_log "$KAFKA_LOG"; die "kafka storage format failed"; }
}

# Ready = our process is alive, the port answers, and the log says so. Only
# `kill -0` here: just after launch the pid may not have exec'd java yet.
# On failure the half-started broker is stopped, so the next `up` starts clean.
wait_kafka() {
  local pid deadline=$((SECONDS + KAFKA_START_TIMEOUT)); pid="$(cat "$KAFKA_PID")"
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || { show_log "$KAFKA_LOG"; rm -f "$KAFKA_PID"; die "Kafka exited during startup (stale data? try: $0 reset)"; }
    port_open "$KAFKA_PORT" && grep -q 'Kafka Server started' "$KAFKA_LOG" && return 0
    sleep 0.5
  done
  show_log "$KAFKA_LOG"; stop_pid Kafka "$KAFKA_PID" 'java'
  die "Kafka not ready after ${KAFKA_START_TIMEOUT}s (log: $KAFKA_LOG; stale data? try: $0 reset)"
}

start_kafka() {
  if kafka_alive; then
    port_open "$KAFKA_PORT" && { log "Kafka already running (pid $(cat "$KAFKA_PID")) on 127.0.0.1:$KAFKA_PORT"; return 0; }
    log "Kafka (pid $(cat "$KAFKA_PID")) is still starting, waiting"; wait_kafka; return 0
  fi
  rm -f "$KAFKA_PID"
  local p; for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    port_open "$p" && die "127.0.0.1:$p is in use by a process this script did not start (no live $KAFKA_PID); stop it or set KAFKA_PORT/KAFKA_CONTROLLER_PORT"
  done
  ensure_jars; write_kafka_config
  [[ -f "$KAFKA_LOG" ]] && mv -f "$KAFKA_LOG" "$KAFKA_LOG.1"   # keep one old log; readiness greps a fresh one
  format_kafka_storage
  log "starting Kafka on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT)"
  # setsid + nohup: the broker outlives this shell and its terminal. Both
  # exec, so $! is the JVM's own pid.
  # shellcheck disable=SC2086  # KAFKA_HEAP_OPTS is deliberately word-split
  nohup setsid java $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$STATE_DIR/log4j2.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPS" </dev/null >>"$KAFKA_LOG" 2>&1 9>&- &
  echo $! >"$KAFKA_PID"
  wait_kafka
  log "Kafka ready (pid $(cat "$KAFKA_PID"))"
}

# --- Redis ------------------------------------------------------------------
redis_ping() { [[ "$(timeout 3 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]; }

start_redis() {
  if redis_alive && redis_ping; then log "Redis already running (pid $(cat "$REDIS_PID")) on 127.0.0.1:$REDIS_PORT"; return 0; fi
  if ! redis_alive; then
    rm -f "$REDIS_PID"
    port_open "$REDIS_PORT" && die "127.0.0.1:$REDIS_PORT is in use by a process this script did not start; stop it or set REDIS_PORT"
    log "starting Redis on 127.0.0.1:$REDIS_PORT"
    # shellcheck disable=SC2094  # redis only writes its log; stdout joins it
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" --dir "$STATE_DIR" </dev/null >>"$REDIS_LOG" 2>&1 9>&- ||
      { show_log "$REDIS_LOG"; die "redis-server failed to start"; }
  fi
  local deadline=$((SECONDS + REDIS_START_TIMEOUT))
  until redis_ping; do
    ((SECONDS < deadline)) || { show_log "$REDIS_LOG"; die "Redis not answering PING after ${REDIS_START_TIMEOUT}s"; }
    sleep 0.2
  done
  log "Redis ready (pid $(cat "$REDIS_PID" 2>/dev/null || echo '?'))"
}

# --- stop / status ----------------------------------------------------------
# stop_pid NAME PIDFILE PATTERN: SIGTERM, wait up to 30 s, then SIGKILL.
stop_pid() {
  if ! pid_alive "$2" "$3"; then rm -f "$2"; log "$1 not running"; return 0; fi
  local pid i; pid="$(cat "$2")"
  log "stopping $1 (pid $pid)"; kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 60; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then log "$1 ignored SIGTERM for 30 s, sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
  rm -f "$2"
}
stop_all() { stop_pid Kafka "$KAFKA_PID" 'kafka\.Kafka'; stop_pid Redis "$REDIS_PID" 'redis-server'; }

status_line() {   # NAME ALIVE-FN PIDFILE PORT
  if "$2"; then
    if port_open "$4"; then echo "$1: running (pid $(cat "$3")) at 127.0.0.1:$4"
    else echo "$1: process up (pid $(cat "$3")) but 127.0.0.1:$4 not answering yet"; fi
  elif port_open "$4"; then echo "$1: not ours, but 127.0.0.1:$4 is in use by another process"
  else echo "$1: stopped (would use 127.0.0.1:$4)"; fi
}

# --- main -------------------------------------------------------------------
# Serialise up/down/reset so parallel callers (e.g. test runners) don't race.
# The daemons are started with fd 9 closed, or they would hold the lock forever.
lock() {
  ensure_state_dir; exec 9>"$STATE_DIR/.lock"
  flock -n 9 && return 0
  log "waiting for another services.sh (lock $STATE_DIR/.lock)"
  flock -w 300 9 || die "another services.sh still holds $STATE_DIR/.lock after 300 s"
}

case "${1:-}" in
  up)     lock; ensure_prereqs; start_redis; start_kafka; print_env ;;
  down)   [[ -d "$STATE_DIR" ]] || { log "nothing to stop"; exit 0; }
          lock; stop_all ;;
  status) status_line Kafka kafka_alive "$KAFKA_PID" "$KAFKA_PORT"
          status_line Redis redis_alive "$REDIS_PID" "$REDIS_PORT" ;;
  env)    print_env ;;
  stop-kafka|stop-redis)
          [[ -d "$STATE_DIR" ]] || { log "nothing to stop"; exit 0; }
          lock
          if [[ $1 == stop-kafka ]]; then stop_pid Kafka "$KAFKA_PID" 'kafka\.Kafka'
          else stop_pid Redis "$REDIS_PID" 'redis-server'; fi ;;
  start-kafka) lock; ensure_prereqs; start_kafka ;;
  start-redis) lock; ensure_prereqs; start_redis ;;
  reset)  if [[ -d "$STATE_DIR" ]]; then
            [[ -f "$MARKER" || -z "$(ls -A "$STATE_DIR")" ]] || die "$STATE_DIR has no $MARKER; not deleting it"
            lock; stop_all
            rm -rf "$STATE_DIR"; log "removed $STATE_DIR"
          else log "nothing to reset"; fi ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
