#!/usr/bin/env bash
# Prints the log4j2.properties of the local Kafka JVMs (services.sh, cluster.sh):
# INFO to the console, which the caller sends to the node's log file, and each
# LOGGER named only at WARN. Usage: deploy/local/kafka-log4j2.sh [LOGGER...] >FILE
set -euo pipefail

cat <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
EOF
i=0
for name in "$@"; do
  i=$((i + 1))
  printf 'logger.q%d.name = %s\nlogger.q%d.level = WARN\n' "$i" "$name" "$i"
done
