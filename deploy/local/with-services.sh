#!/usr/bin/env bash
# Runs a command with Kafka, Redis and the schema registry available, then leaves things as it found them.
#
#   deploy/local/with-services.sh COMMAND [ARGS...]
#
# With KAFKA_BOOTSTRAP_SERVERS and REDIS_URL both set, the command runs against
# those servers and nothing is started (SCHEMA_REGISTRY_URL is passed on as it
# is: the tests that need a registry fail, saying how to start one, without it).
# Otherwise the local services are started (deploy/local/services.sh up), their
# addresses exported (SCHEMA_REGISTRY_URL too), the command run, and the
# services stopped again unless they were all already running.
# Exits with the command's exit code.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
services="$here/services.sh"

if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ] && [ -n "${REDIS_URL:-}" ]; then
    echo "with-services: using KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP_SERVERS and the given REDIS_URL" >&2
    exec "$@"
fi

already_running=$("$services" status | grep -c "running (pid" || true)
if [ "$already_running" != 3 ]; then
    trap '"$services" down' EXIT
fi
eval "$("$services" up)"
set +e
"$@"
status=$?
set -e
exit $status
