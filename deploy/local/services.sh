#!/usr/bin/env bash
# Local Kafka (KRaft, single node) + Redis + a schema registry (Apicurio, Confluent-
# compatible API) for streamscore development and tests, without Docker. Run `deploy/local/services.sh --help` for usage.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
POM="$SCRIPT_DIR/pom.xml"
REGISTRY_PROJECT="$SCRIPT_DIR/registry"   # pom.xml + .mvn/maven.config: Apicurio Registry as a Quarkus fast-jar

KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_SECURE_PORT="${KAFKA_SECURE_PORT:-19094}"
KAFKA_MTLS_PORT="${KAFKA_MTLS_PORT:-19095}"
REDIS_PORT="${REDIS_PORT:-16379}"
REDIS_TLS_PORT="${REDIS_TLS_PORT:-16380}"
REGISTRY_PORT="${REGISTRY_PORT:-18081}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
REDIS_START_TIMEOUT="${REDIS_START_TIMEOUT:-20}"
REGISTRY_START_TIMEOUT="${REGISTRY_START_TIMEOUT:-60}"
# Small and quick to start: the registry serves a few schemas to tests (about 210 MB resident, 3-5 s to ready).
REGISTRY_JAVA_OPTS="${REGISTRY_JAVA_OPTS:--Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
STATE_DIR="${STREAMSCORE_STATE_DIR:-$REPO_ROOT/.local-services}"
[[ "$STATE_DIR" == /* ]] || STATE_DIR="$PWD/$STATE_DIR"   # `env --secure` prints absolute paths
CACHE_DIR="${STREAMSCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streamscore}"

KAFKA_PID="$STATE_DIR/kafka.pid";  KAFKA_LOG="$STATE_DIR/kafka.log"
REDIS_PID="$STATE_DIR/redis.pid";  REDIS_LOG="$STATE_DIR/redis.log"
REGISTRY_PID="$STATE_DIR/registry.pid"; REGISTRY_LOG="$STATE_DIR/registry.log"
KAFKA_DATA="$STATE_DIR/kafka-data"; KAFKA_PROPS="$STATE_DIR/server.properties"
MARKER="$STATE_DIR/.streamscore-state"   # lets `reset` prove the dir is ours before rm -rf
# Written when the storage is formatted with the SCRAM user (cluster id + a hash
# of the password); storage without it predates the secure listeners.
STORAGE_MARKER="$STATE_DIR/kafka-storage.secure"

# Throwaway TLS material and passwords, generated once per state dir (see
# ensure_secure_material). The secure listeners and Redis's TLS port use them.
SECURE_DIR="$STATE_DIR/secure"
SECURE_USER=streamscore                          # SCRAM user and Redis ACL user
KAFKA_PASSWORD_FILE="$SECURE_DIR/kafka-password"
REDIS_PASSWORD_FILE="$SECURE_DIR/redis-password"
REDIS_ACL="$SECURE_DIR/redis-users.acl"

log() { echo "services: $*" >&2; }   # stdout is reserved for the export lines
die() { echo "services: ERROR: $*" >&2; exit 1; }

usage() {
  cat <<EOF
Usage: deploy/local/services.sh {up|env} [--secure|--mtls]
       deploy/local/services.sh {down|status|reset|--help}
       deploy/local/services.sh {stop-kafka|start-kafka|stop-redis|start-redis}
       deploy/local/services.sh {stop-registry|start-registry}
       deploy/local/services.sh jars

Local Apache Kafka 4.x broker (KRaft, one broker+controller node), Redis and a
schema registry (Apicurio Registry 2.4.2.Final, its Confluent-compatible API),
all bound to 127.0.0.1, run as plain background processes (no Docker).

  up      Install missing prerequisites (java 17+, maven, redis-server, openssl
          via apt), fetch the broker jars and build the registry (both cached;
          the registry's first build takes a minute or a few, mostly downloads),
          generate the test secrets (once, see below), start Kafka, Redis and
          the registry if not running, wait until each answers (every port
          below; the registry's /health/ready), then print on stdout:
            export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:\$KAFKA_PORT
            export REDIS_URL=redis://127.0.0.1:\$REDIS_PORT/0
            export SCHEMA_REGISTRY_URL=http://127.0.0.1:\$REGISTRY_PORT/apis/ccompat/v7
          Progress goes to stderr, so:  eval "\$(deploy/local/services.sh up)"
          Idempotent: running services are only reported.
  up --secure, up --mtls
          The same, but print the export lines of the secured endpoints
          (\$S is the secrets folder, \$STATE_DIR/secure, as an absolute path;
          the registry's line is the same in every variant: it serves plain HTTP):
          --secure: Kafka SASL_SSL with SCRAM-SHA-512, Redis over TLS with a user:
            export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:\$KAFKA_SECURE_PORT
            export KAFKA_SECURITY_PROTOCOL=SASL_SSL
            export KAFKA_SASL_MECHANISM=SCRAM-SHA-512
            export KAFKA_SASL_USERNAME=$SECURE_USER
            export KAFKA_SASL_PASSWORD_FILE=\$S/kafka-password
            export KAFKA_SSL_CAFILE=\$S/ca.pem
            export REDIS_URL=rediss://$SECURE_USER@127.0.0.1:\$REDIS_TLS_PORT/0
            export REDIS_PASSWORD_FILE=\$S/redis-password
            export REDIS_CA_FILE=\$S/ca.pem
          --mtls: Kafka SSL with a client certificate, Redis as for --secure:
            export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:\$KAFKA_MTLS_PORT
            export KAFKA_SECURITY_PROTOCOL=SSL
            export KAFKA_SSL_CAFILE=\$S/ca.pem
            export KAFKA_SSL_CERTFILE=\$S/client.pem
            export KAFKA_SSL_KEYFILE=\$S/client.key
            (and the three REDIS_ lines of --secure)
  down    Stop all three (SIGTERM, up to 30 s, then SIGKILL); ok if nothing runs.
  status  Say whether each service runs, and where (plain and secured ports).
  env     Print only the export lines above; env --secure and env --mtls
          print those variants. Starts nothing, generates nothing.
  reset   down, then delete the state dir (topics, offsets, logs, secrets). Use
          it when the broker will not start from old data (e.g. after changing
          ports), or when up says the storage predates the secure listeners.

  stop-kafka, stop-redis    Stop one service as \`down\` does; the other keeps running.
  start-kafka, start-redis  Start one service as \`up\` does (waits until it answers),
          with its data as it was left (Redis keeps nothing: it runs without
          persistence). For fault injection, e.g. the chaos suite (tests/chaos).
  jars    Resolve the broker jars (cached) and print their folder; starts nothing.
          deploy/local/cluster.sh (three brokers) runs from the same jars.
  stop-registry, start-registry  The same for the schema registry (in-memory storage:
          every start is empty, schema ids start again at 1).

Listeners, all on 127.0.0.1, always served:
  Schema registry :\$REGISTRY_PORT  HTTP, no authentication; the Confluent-compatible
                  API under /apis/ccompat/v7 (docs/formats.md)
  Kafka  :\$KAFKA_PORT             PLAINTEXT, no authentication (as before)
         :\$KAFKA_SECURE_PORT    SASL_SSL: SCRAM-SHA-512 or SCRAM-SHA-256 as user
                                 $SECURE_USER (password in \$S/kafka-password), or
                                 OAUTHBEARER with an UNSECURED (unsigned, alg none)
                                 JWT: anyone can claim any name. Tests only.
         :\$KAFKA_MTLS_PORT        SSL, a client certificate signed by \$S/ca.pem required
         :\$KAFKA_CONTROLLER_PORT  KRaft controller, PLAINTEXT
  Redis  :\$REDIS_PORT             plain, default user, no password (as before)
         :\$REDIS_TLS_PORT         TLS (no client certificate); user $SECURE_USER with
                                 the password in \$S/redis-password, or the default user
The broker and Redis present one certificate, signed by the throwaway CA
\$S/ca.pem, valid for IP 127.0.0.1 only: connect to 127.0.0.1, not localhost.

Secrets in \$STATE_DIR/secure (folder 700, files 600), made on first use and then
reused (the TLS files are remade when missing or about to expire):
  ca.pem ca.key            the throwaway CA
  server.pem server.key    broker and Redis certificate (SAN IP:127.0.0.1)
  server.p12 truststore.p12 (+ .password each)  the broker's PKCS12 key/trust stores
  client.pem client.key    client certificate for :\$KAFKA_MTLS_PORT (key unencrypted)
  kafka-password           SCRAM password of $SECURE_USER, set when the storage is formatted
  redis-password           Redis password of $SECURE_USER
  redis-users.acl          Redis ACL file (the password only as its SHA-256)
The SCRAM user lives in the broker's storage: storage formatted by an older
services.sh has none, and up then stops and asks for \`reset\`.

Environment (default):
  KAFKA_PORT (19092)  KAFKA_CONTROLLER_PORT (19093)
  KAFKA_SECURE_PORT (19094)  KAFKA_MTLS_PORT (19095)
  REDIS_PORT (16379)  REDIS_TLS_PORT (16380)  REGISTRY_PORT (18081)
  REGISTRY_START_TIMEOUT (60 s)  REGISTRY_JAVA_OPTS (-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1)
  KAFKA_START_TIMEOUT (90 s)  REDIS_START_TIMEOUT (20 s)
  KAFKA_HEAP_OPTS (-Xmx512m -Xms256m)
  STREAMSCORE_STATE_DIR (<repo>/.local-services): data, logs, pid files, configs, secrets
  STREAMSCORE_CACHE_DIR (\${XDG_CACHE_HOME:-\$HOME/.cache}/streamscore): broker jars, the registry's build
EOF
}

print_env() {
  echo "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT"
  echo "export REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0"
  print_env_registry
}

print_env_registry() { echo "export SCHEMA_REGISTRY_URL=http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"; }

# %q: the lines stay eval-able should the state dir's path hold a space.
print_env_redis_tls() {
  echo "export REDIS_URL=rediss://$SECURE_USER@127.0.0.1:$REDIS_TLS_PORT/0"
  printf 'export REDIS_PASSWORD_FILE=%q\n' "$REDIS_PASSWORD_FILE"
  printf 'export REDIS_CA_FILE=%q\n' "$SECURE_DIR/ca.pem"
  print_env_registry
}

print_env_secure() {
  echo "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_SECURE_PORT"
  echo "export KAFKA_SECURITY_PROTOCOL=SASL_SSL"
  echo "export KAFKA_SASL_MECHANISM=SCRAM-SHA-512"
  echo "export KAFKA_SASL_USERNAME=$SECURE_USER"
  printf 'export KAFKA_SASL_PASSWORD_FILE=%q\n' "$KAFKA_PASSWORD_FILE"
  printf 'export KAFKA_SSL_CAFILE=%q\n' "$SECURE_DIR/ca.pem"
  print_env_redis_tls
}

print_env_mtls() {
  echo "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_MTLS_PORT"
  echo "export KAFKA_SECURITY_PROTOCOL=SSL"
  printf 'export KAFKA_SSL_CAFILE=%q\n' "$SECURE_DIR/ca.pem"
  printf 'export KAFKA_SSL_CERTFILE=%q\n' "$SECURE_DIR/client.pem"
  printf 'export KAFKA_SSL_KEYFILE=%q\n' "$SECURE_DIR/client.key"
  print_env_redis_tls
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
registry_alive() { pid_alive "$REGISTRY_PID" 'quarkus-run\.jar'; }

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
  command -v openssl >/dev/null || { log "installing openssl"; apt_install openssl; }
  command -v keytool >/dev/null || die "keytool (part of Java) not found next to java"
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

# --- secrets and TLS material ---------------------------------------------
# Everything a test needs to talk to the secured endpoints, made here on first
# use and reused afterwards: nothing of it is committed, and none of it protects
# anything beyond this machine's loopback tests. Folder 700, files 600.
TLS_FILES=(ca.pem ca.key server.pem server.key server.p12 server.p12.password
           truststore.p12 truststore.p12.password client.pem client.key)

new_password() { openssl rand -hex 24 | tr -d '\n'; }   # hex: safe in URLs, ACLs, --add-scram

# write_secret FILE: stdin into FILE (mode 600), atomically.
write_secret() { local tmp; tmp="$(mktemp "$1.XXXXXX")"; cat >"$tmp"; chmod 600 "$tmp"; mv -f "$tmp" "$1"; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Complete, one CA, and not expiring within a day; otherwise remade as a whole.
tls_material_ok() {
  local f; for f in "${TLS_FILES[@]}"; do [[ -s "$SECURE_DIR/$f" ]] || return 1; done
  openssl verify -CAfile "$SECURE_DIR/ca.pem" "$SECURE_DIR/server.pem" "$SECURE_DIR/client.pem" >/dev/null 2>&1 &&
    openssl x509 -checkend 86400 -noout -in "$SECURE_DIR/ca.pem" >/dev/null &&
    openssl x509 -checkend 86400 -noout -in "$SECURE_DIR/server.pem" >/dev/null &&
    openssl x509 -checkend 86400 -noout -in "$SECURE_DIR/client.pem" >/dev/null
}

generate_tls_material() {
  log "generating a throwaway CA, server and client certificates in $SECURE_DIR"
  local f t remade=0; [[ -e "$SECURE_DIR/ca.pem" ]] && remade=1
  for f in "${TLS_FILES[@]}"; do rm -f "$SECURE_DIR/$f"; done   # never a mix of two CAs
  t="$(mktemp -d "$SECURE_DIR/.tls.XXXXXX")"
  # Our own minimal openssl config: the system's may add extensions of its own.
  # The server certificate names ONLY IP:127.0.0.1 (no DNS name, and a CN that
  # is no host name), so connecting via "localhost" is a hostname mismatch.
  cat >"$t/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = streamscore
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
  if ! {
    openssl req -x509 -config "$t/openssl.cnf" -extensions ca_ext -newkey rsa:2048 -nodes \
      -keyout "$t/ca.key" -out "$t/ca.pem" -days 3650 -subj "/O=streamscore local/CN=streamscore throwaway test CA" &&
    openssl req -new -config "$t/openssl.cnf" -newkey rsa:2048 -nodes \
      -keyout "$t/server.key" -out "$t/server.csr" -subj "/O=streamscore local/CN=streamscore local server" &&
    openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 825 -extfile "$t/openssl.cnf" -extensions server_ext -out "$t/server.pem" &&
    openssl req -new -config "$t/openssl.cnf" -newkey rsa:2048 -nodes \
      -keyout "$t/client.key" -out "$t/client.csr" -subj "/O=streamscore local/CN=$SECURE_USER" &&
    openssl x509 -req -in "$t/client.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 825 -extfile "$t/openssl.cnf" -extensions client_ext -out "$t/client.pem" &&
    new_password >"$t/server.p12.password" && new_password >"$t/truststore.p12.password" &&
    # The broker's key store (key + chain) and trust store (the CA, to check client certificates).
    openssl pkcs12 -export -in "$t/server.pem" -inkey "$t/server.key" -certfile "$t/ca.pem" \
      -name streamscore-server -out "$t/server.p12" -passout "file:$t/server.p12.password" &&
    keytool -importcert -noprompt -alias streamscore-ca -file "$t/ca.pem" -keystore "$t/truststore.p12" \
      -storetype PKCS12 -storepass:file "$t/truststore.p12.password"
  } >"$t/gen.log" 2>&1; then
    cat "$t/gen.log" >&2; rm -rf "$t"; die "could not generate the TLS material (openssl/keytool failed)"
  fi
  for f in "${TLS_FILES[@]}"; do chmod 600 "$t/$f"; mv -f "$t/$f" "$SECURE_DIR/$f"; done
  rm -rf "$t"
  if ((remade)) && { kafka_alive || redis_alive; }; then
    log "NOTE: the certificates were remade; a running Kafka or Redis still serves the old one: restart it ($0 down, then up)"
  fi
}

# Before Kafka's storage is first formatted (the SCRAM user is set then) and
# before either service starts. Idempotent: only what is missing is made.
ensure_secure_material() {
  ensure_state_dir
  mkdir -p "$SECURE_DIR"; chmod 700 "$SECURE_DIR"
  (
    umask 077
    [[ -s "$KAFKA_PASSWORD_FILE" ]] || new_password | write_secret "$KAFKA_PASSWORD_FILE"
    [[ -s "$REDIS_PASSWORD_FILE" ]] || new_password | write_secret "$REDIS_PASSWORD_FILE"
    tls_material_ok || generate_tls_material
  )
  if ! tls_material_ok; then die "TLS material in $SECURE_DIR is still incomplete or invalid after generating it"; fi
}

# --- Kafka ------------------------------------------------------------------
# Listeners: PLAINTEXT (clients, between brokers), CONTROLLER (KRaft, PLAINTEXT),
# SECURE (SASL_SSL: SCRAM and test-only OAUTHBEARER) and MTLS (SSL, client
# certificate required). The file holds the key store passwords: mode 600.
write_kafka_config() {
  local sasl_jaas=org.apache.kafka.common.security
  touch "$KAFKA_PROPS"; chmod 600 "$KAFKA_PROPS"
  cat >"$KAFKA_PROPS" <<EOF
# Generated by deploy/local/services.sh on each start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SECURE://127.0.0.1:$KAFKA_SECURE_PORT,MTLS://127.0.0.1:$KAFKA_MTLS_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SECURE://127.0.0.1:$KAFKA_SECURE_PORT,MTLS://127.0.0.1:$KAFKA_MTLS_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,MTLS:SSL
# TLS, for SECURE and MTLS: throwaway certificate for IP 127.0.0.1 (see ensure_secure_material).
ssl.keystore.type=PKCS12
ssl.keystore.location=$SECURE_DIR/server.p12
ssl.keystore.password=$(<"$SECURE_DIR/server.p12.password")
ssl.key.password=$(<"$SECURE_DIR/server.p12.password")
ssl.truststore.type=PKCS12
ssl.truststore.location=$SECURE_DIR/truststore.p12
ssl.truststore.password=$(<"$SECURE_DIR/truststore.p12.password")
listener.name.secure.ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required
# SECURE: SCRAM users are created when the storage is formatted (--add-scram).
listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,OAUTHBEARER
listener.name.secure.scram-sha-512.sasl.jaas.config=$sasl_jaas.scram.ScramLoginModule required;
listener.name.secure.scram-sha-256.sasl.jaas.config=$sasl_jaas.scram.ScramLoginModule required;
# OAUTHBEARER, FOR TESTS ONLY: with no sasl.server.callback.handler.class the
# broker uses Kafka's built-in UNSECURED JWT validator, which accepts any
# unsigned token ({"alg":"none"}) with a sub and an unexpired exp: anyone can
# claim to be anyone. (unsecuredLoginStringClaim_sub: the broker's own token.)
listener.name.secure.oauthbearer.sasl.jaas.config=$sasl_jaas.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="streamscore-broker";
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
  "$SCRIPT_DIR/kafka-log4j2.sh" kafka.request.logger 'kafka.network.RequestChannel$' state.change.logger \
      kafka.server.KafkaConfig kafka.log kafka.cluster kafka.coordinator \
      org.apache.kafka.raft org.apache.kafka.controller org.apache.kafka.metadata \
      org.apache.kafka.image org.apache.kafka.storage org.apache.kafka.coordinator \
      org.apache.kafka.common.config org.apache.kafka.common.utils.AppInfoParser \
      org.apache.kafka.server kafka.server.metadata kafka.server.ReplicaFetcherManager \
      kafka.server.ReplicaAlterLogDirsManager kafka.server.ClientQuotaManager >"$STATE_DIR/log4j2.properties"
}

# The SCRAM user is created with the storage (KIP-900), so storage formatted
# without it (by an older services.sh) cannot serve SECURE: refuse it. The
# marker also holds a hash of the password, to catch a remade $SECURE_DIR.
check_kafka_storage() {
  [[ -f "$KAFKA_DATA/meta.properties" ]] || return 0
  local id; id="$(sed -n 's/^cluster\.id=//p' "$KAFKA_DATA/meta.properties")"
  if [[ ! -f "$STORAGE_MARKER" ]] || ! grep -qxF "cluster.id=$id" "$STORAGE_MARKER"; then
    die "Kafka's storage in $KAFKA_DATA was formatted by an older services.sh, without the SCRAM user '$SECURE_USER' of the SASL_SSL listener (:$KAFKA_SECURE_PORT). Run: $0 reset (it deletes the local topics, offsets and logs), then up again"
  fi
  grep -qxF "scram.password.sha256=$(sha256_of "$KAFKA_PASSWORD_FILE")" "$STORAGE_MARKER" ||
    die "$KAFKA_PASSWORD_FILE is not the password Kafka's storage was formatted with (was $SECURE_DIR deleted?). Run: $0 reset, then up again"
}

# argq ARG: ARG quoted for a java @argument-file.
argq() { local a="${1//\\/\\\\}"; printf '"%s"\n' "${a//\"/\\\"}"; }

format_kafka_storage() {
  [[ -f "$KAFKA_DATA/meta.properties" ]] && return 0
  local uuid pw args rc=0 mech a
  uuid="$(java -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
  log "formatting Kafka storage (cluster id $uuid) with SCRAM user $SECURE_USER"
  pw="$(<"$KAFKA_PASSWORD_FILE")"
  [[ "$pw" =~ ^[A-Za-z0-9._~-]+$ ]] || die "$KAFKA_PASSWORD_FILE: the password must be letters, digits, or ._~- (it goes into --add-scram)"
  # The StorageTool's arguments go in a java @argument-file (mode 600, removed
  # at once), so the password is not on a command line that ps would show.
  args="$(mktemp "$SECURE_DIR/.format-args.XXXXXX")"
  {
    for a in kafka.tools.StorageTool format --standalone -t "$uuid" -c "$KAFKA_PROPS"; do argq "$a"; done
    for mech in SCRAM-SHA-512 SCRAM-SHA-256; do
      argq --add-scram; argq "$mech=[name=$SECURE_USER,password=$pw]"
    done
  } >"$args"
  java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$STATE_DIR/log4j2.properties" \
    "@$args" >>"$KAFKA_LOG" 2>&1 || rc=$?
  rm -f "$args"
  ((rc == 0)) || { show_log "$KAFKA_LOG"; die "kafka storage format failed"; }
  printf 'cluster.id=%s\nscram.user=%s\nscram.password.sha256=%s\n' \
    "$uuid" "$SECURE_USER" "$(sha256_of "$KAFKA_PASSWORD_FILE")" | write_secret "$STORAGE_MARKER"
}

kafka_ports_open() { port_open "$KAFKA_PORT" && port_open "$KAFKA_SECURE_PORT" && port_open "$KAFKA_MTLS_PORT"; }

# Ready = our process is alive, its ports answer, and the log says so. Only
# `kill -0` here: just after launch the pid may not have exec'd java yet.
# On failure the half-started broker is stopped, so the next `up` starts clean.
wait_kafka() {
  local pid deadline=$((SECONDS + KAFKA_START_TIMEOUT)); pid="$(cat "$KAFKA_PID")"
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || { show_log "$KAFKA_LOG"; rm -f "$KAFKA_PID"; die "Kafka exited during startup (stale data? try: $0 reset)"; }
    kafka_ports_open && grep -q 'Kafka Server started' "$KAFKA_LOG" && return 0
    sleep 0.5
  done
  show_log "$KAFKA_LOG"; stop_pid Kafka "$KAFKA_PID" 'java'
  die "Kafka not ready after ${KAFKA_START_TIMEOUT}s (log: $KAFKA_LOG; stale data? try: $0 reset)"
}

start_kafka() {
  ensure_secure_material; check_kafka_storage
  if kafka_alive; then
    if kafka_ports_open; then
      log "Kafka already running (pid $(cat "$KAFKA_PID")) on 127.0.0.1:$KAFKA_PORT (SASL_SSL :$KAFKA_SECURE_PORT, mutual TLS :$KAFKA_MTLS_PORT)"; return 0
    fi
    if port_open "$KAFKA_PORT" && grep -q 'Kafka Server started' "$KAFKA_LOG" 2>/dev/null; then
      die "Kafka (pid $(cat "$KAFKA_PID")) runs without its secure listeners :$KAFKA_SECURE_PORT/:$KAFKA_MTLS_PORT (started by an older services.sh?). Run: $0 down, then up again"
    fi
    log "Kafka (pid $(cat "$KAFKA_PID")) is still starting, waiting"; wait_kafka; return 0
  fi
  rm -f "$KAFKA_PID"
  local p; for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SECURE_PORT" "$KAFKA_MTLS_PORT"; do
    port_open "$p" && die "127.0.0.1:$p is in use by a process this script did not start (no live $KAFKA_PID); stop it or set KAFKA_PORT/KAFKA_CONTROLLER_PORT/KAFKA_SECURE_PORT/KAFKA_MTLS_PORT"
  done
  ensure_jars; write_kafka_config
  [[ -f "$KAFKA_LOG" ]] && mv -f "$KAFKA_LOG" "$KAFKA_LOG.1"   # keep one old log; readiness greps a fresh one
  format_kafka_storage
  log "starting Kafka on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT, SASL_SSL :$KAFKA_SECURE_PORT, mutual TLS :$KAFKA_MTLS_PORT)"
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
# A PING over TLS, checking the certificate: a bare connect would make Redis log an error.
redis_tls_ping() {
  [[ "$(timeout 3 redis-cli --tls --cacert "$SECURE_DIR/ca.pem" -h 127.0.0.1 -p "$REDIS_TLS_PORT" ping 2>/dev/null)" == PONG ]]
}
redis_ready() { redis_ping && redis_tls_ping; }

# ACL file, rewritten on each start from $REDIS_PASSWORD_FILE: the password
# appears only as its SHA-256 (#...), never on redis-server's command line.
# With an ACL file the default user must be declared in it: as before, no password.
write_redis_acl() {
  local hash; hash="$(tr -d ' \t\r\n' <"$REDIS_PASSWORD_FILE" | sha256sum | cut -d' ' -f1)"
  printf 'user default on nopass ~* &* +@all\nuser %s on #%s ~* &* +@all\n' "$SECURE_USER" "$hash" |
    write_secret "$REDIS_ACL"
}

start_redis() {
  ensure_secure_material
  if redis_alive && redis_ping; then
    redis_tls_ping || die "Redis (pid $(cat "$REDIS_PID")) does not answer on its TLS port :$REDIS_TLS_PORT with a certificate of $SECURE_DIR/ca.pem (started by an older services.sh, or the certificates were remade?). Run: $0 stop-redis, then $0 start-redis (Redis keeps no data)"
    log "Redis already running (pid $(cat "$REDIS_PID")) on 127.0.0.1:$REDIS_PORT (TLS :$REDIS_TLS_PORT)"; return 0
  fi
  if ! redis_alive; then
    rm -f "$REDIS_PID"
    local p; for p in "$REDIS_PORT" "$REDIS_TLS_PORT"; do
      port_open "$p" && die "127.0.0.1:$p is in use by a process this script did not start; stop it or set REDIS_PORT/REDIS_TLS_PORT"
    done
    write_redis_acl
    log "starting Redis on 127.0.0.1:$REDIS_PORT (TLS :$REDIS_TLS_PORT)"
    # The TLS port serves the broker's certificate; clients need none (--tls-auth-clients no).
    # shellcheck disable=SC2094  # redis only writes its log; stdout joins it
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --tls-port "$REDIS_TLS_PORT" --tls-cert-file "$SECURE_DIR/server.pem" --tls-key-file "$SECURE_DIR/server.key" \
      --tls-ca-cert-file "$SECURE_DIR/ca.pem" --tls-auth-clients no --aclfile "$REDIS_ACL" \
      --daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" --dir "$STATE_DIR" </dev/null >>"$REDIS_LOG" 2>&1 9>&- ||
      { show_log "$REDIS_LOG"; die "redis-server failed to start"; }
  fi
  local deadline=$((SECONDS + REDIS_START_TIMEOUT))
  until redis_ready; do
    ((SECONDS < deadline)) || { show_log "$REDIS_LOG"; die "Redis not answering PING on :$REDIS_PORT, or its TLS port :$REDIS_TLS_PORT closed, after ${REDIS_START_TIMEOUT}s"; }
    sleep 0.2
  done
  log "Redis ready (pid $(cat "$REDIS_PID" 2>/dev/null || echo '?'))"
}

# --- schema registry --------------------------------------------------------
# Built once per content of $REGISTRY_PROJECT (its pom.xml and .mvn/maven.config),
# in a temp dir under the cache, outside the checkout; only target/quarkus-app
# is kept, renamed into place whole, so a half-finished build is never used.
REGISTRY_APP=""
ensure_registry_build() {
  local hash dir tmp
  hash="$(cat "$REGISTRY_PROJECT/pom.xml" "$REGISTRY_PROJECT/.mvn/maven.config" | sha256sum | cut -c1-16)"
  dir="$CACHE_DIR/registry-$hash"; REGISTRY_APP="$dir/quarkus-app"
  [[ -f "$REGISTRY_APP/quarkus-run.jar" ]] && return 0
  log "building the schema registry with maven into $dir (first run only: a minute or a few, mostly downloads)"
  mkdir -p "$CACHE_DIR"
  find "$CACHE_DIR" -maxdepth 1 -name '.registry-*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
  tmp="$(mktemp -d "$CACHE_DIR/.registry-$hash.XXXXXX")"; chmod 755 "$tmp"
  cp -r "$REGISTRY_PROJECT/pom.xml" "$REGISTRY_PROJECT/.mvn" "$tmp/"
  # From inside the folder: maven reads .mvn/maven.config from the project's own directory.
  if ! (cd "$tmp" && mvn -B package -DskipTests >"$tmp/mvn.log" 2>&1); then
    tail -n 60 "$tmp/mvn.log" >&2; rm -rf "$tmp"; die "maven could not build the schema registry ($REGISTRY_PROJECT)"
  fi
  [[ -f "$tmp/target/quarkus-app/quarkus-run.jar" ]] || { rm -rf "$tmp"; die "the registry build made no quarkus-app/quarkus-run.jar"; }
  mkdir -p "$tmp/keep"; mv "$tmp/target/quarkus-app" "$tmp/keep/quarkus-app"; mv "$tmp/mvn.log" "$tmp/keep/"
  mv -T "$tmp/keep" "$dir" 2>/dev/null || true   # -T: a concurrent run may have put it in place already
  rm -rf "$tmp"
  [[ -f "$REGISTRY_APP/quarkus-run.jar" ]] || die "registry build $REGISTRY_APP missing after the build"
}

# /health/ready answers 200 once the registry serves; bash's /dev/tcp, no curl needed.
registry_ready() {
  local status
  status="$(timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$REGISTRY_PORT &&
    printf 'GET /health/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && head -n1 <&3" 2>/dev/null)" || return 1
  [[ "$status" == *" 200"* ]]
}

start_registry() {
  if registry_alive; then
    if ! registry_ready; then log "schema registry (pid $(cat "$REGISTRY_PID")) is still starting, waiting"; fi
  else
    rm -f "$REGISTRY_PID"
    port_open "$REGISTRY_PORT" && die "127.0.0.1:$REGISTRY_PORT is in use by a process this script did not start (no live $REGISTRY_PID); stop it or set REGISTRY_PORT"
    ensure_registry_build
    [[ -f "$REGISTRY_LOG" ]] && mv -f "$REGISTRY_LOG" "$REGISTRY_LOG.1"
    log "starting the schema registry on 127.0.0.1:$REGISTRY_PORT (in-memory storage: empty at each start)"
    # shellcheck disable=SC2086  # REGISTRY_JAVA_OPTS is deliberately word-split
    HTTP_PORT="$REGISTRY_PORT" QUARKUS_HTTP_HOST=127.0.0.1 nohup setsid java $REGISTRY_JAVA_OPTS \
      -jar "$REGISTRY_APP/quarkus-run.jar" </dev/null >>"$REGISTRY_LOG" 2>&1 9>&- &
    echo $! >"$REGISTRY_PID"
  fi
  local pid deadline=$((SECONDS + REGISTRY_START_TIMEOUT)); pid="$(cat "$REGISTRY_PID")"
  until registry_ready; do
    if ! kill -0 "$pid" 2>/dev/null; then show_log "$REGISTRY_LOG"; rm -f "$REGISTRY_PID"; die "the schema registry exited during startup"; fi
    if ((SECONDS >= deadline)); then
      show_log "$REGISTRY_LOG"; stop_pid "schema registry" "$REGISTRY_PID" 'quarkus-run\.jar'
      die "the schema registry not ready after ${REGISTRY_START_TIMEOUT}s (log: $REGISTRY_LOG)"
    fi
    sleep 0.3
  done
  log "schema registry ready (pid $pid) at http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
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
stop_all() {
  stop_pid "schema registry" "$REGISTRY_PID" 'quarkus-run\.jar'
  stop_pid Kafka "$KAFKA_PID" 'kafka\.Kafka'; stop_pid Redis "$REDIS_PID" 'redis-server'
}

# status_line NAME ALIVE-FN PIDFILE PORT [KIND:PORT[:PROBE-FN]...]: one line per
# service, the secured ports after a semicolon (tests count "running (pid" lines).
status_line() {
  local extra="" spec kind port probe
  for spec in "${@:5}"; do
    IFS=: read -r kind port probe <<<"$spec"
    extra+="${extra:+, }$kind 127.0.0.1:$port"
    if "$2" && ! "${probe:-port_open}" "$port"; then extra+=" (not answering)"; fi
  done
  extra="${extra:+; $extra}"
  if "$2"; then
    if port_open "$4"; then echo "$1: running (pid $(cat "$3")) at 127.0.0.1:$4$extra"
    else echo "$1: process up (pid $(cat "$3")) but 127.0.0.1:$4 not answering yet$extra"; fi
  elif port_open "$4"; then echo "$1: not ours, but 127.0.0.1:$4 is in use by another process"
  else echo "$1: stopped (would use 127.0.0.1:$4$extra)"; fi
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

# up/env [--secure|--mtls]: which export lines to print.
env_variant() {
  (($# <= 1)) || { usage >&2; exit 2; }
  case "${1:-}" in
    "") echo print_env ;;
    --secure) echo print_env_secure ;;
    --mtls) echo print_env_mtls ;;
    *) usage >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  up)     printer="$(env_variant "${@:2}")" || exit 2
          lock; ensure_prereqs; ensure_secure_material; check_kafka_storage
          start_redis; start_kafka; start_registry; "$printer" ;;
  down)   [[ -d "$STATE_DIR" ]] || { log "nothing to stop"; exit 0; }
          lock; stop_all ;;
  status) status_line Kafka kafka_alive "$KAFKA_PID" "$KAFKA_PORT" "SASL_SSL:$KAFKA_SECURE_PORT" "mutual TLS:$KAFKA_MTLS_PORT"
          status_line Redis redis_alive "$REDIS_PID" "$REDIS_PORT" "TLS:$REDIS_TLS_PORT:redis_tls_ping"
          status_line Registry registry_alive "$REGISTRY_PID" "$REGISTRY_PORT" ;;
  env)    printer="$(env_variant "${@:2}")" || exit 2
          "$printer" ;;
  stop-kafka|stop-redis)
          [[ -d "$STATE_DIR" ]] || { log "nothing to stop"; exit 0; }
          lock
          if [[ $1 == stop-kafka ]]; then stop_pid Kafka "$KAFKA_PID" 'kafka\.Kafka'
          else stop_pid Redis "$REDIS_PID" 'redis-server'; fi ;;
  stop-registry)
          [[ -d "$STATE_DIR" ]] || { log "nothing to stop"; exit 0; }
          lock; stop_pid "schema registry" "$REGISTRY_PID" 'quarkus-run\.jar' ;;
  start-registry) lock; ensure_prereqs; start_registry ;;
  jars)   # For sibling scripts (cluster.sh): resolve the broker jars (cached) and print their folder.
          command -v java >/dev/null && command -v mvn >/dev/null || ensure_prereqs
          ensure_jars; echo "$KAFKA_LIBS" ;;
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
