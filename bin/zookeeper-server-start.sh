#!/usr/bin/env bash
# Start Debian's ZooKeeper (package `zookeeper`): bin/zookeeper-server-start.sh [-daemon] CONFIG
# One server in the foreground (or in the background with -daemon, output in
# data/logs/zookeeper-NAME.out), with the given zoo.cfg-style properties file, e.g.
# config/zookeeper.properties. Creates dataDir (relative paths: against the repository root).
# The pid goes to data/run/zookeeper-NAME.pid for bin/stop-cluster.sh. Heap: $ZK_HEAP_OPTS.
set -euo pipefail
usage() { echo "USAGE: $0 [-daemon] zookeeper.properties" >&2; exit 1; }
daemon=0
if [ "${1:-}" = "-daemon" ]; then daemon=1; shift; fi
[ $# -eq 1 ] || usage
[ -f "$1" ] || { echo "$0: no such config file: $1" >&2; exit 1; }
config="$(realpath -- "$1")"
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

jar=/usr/share/java/zookeeper.jar
if [ ! -f "$jar" ]; then
    strom_setup_system
    [ -f "$jar" ] || { say "$jar not found: apt-get install -y zookeeper"; exit 1; }
fi
data_dir="$(sed -n 's/^[[:space:]]*dataDir[[:space:]]*[=:][[:space:]]*//p' "$config" | tail -n 1)"
data_dir="${data_dir%"${data_dir##*[![:space:]]}"}"
[ -n "$data_dir" ] || { say "$config: dataDir is not set"; exit 1; }
mkdir -p "$data_dir"

# /etc/zookeeper/conf holds Debian's logging config; the jar's manifest pulls in the rest of
# /usr/share/java. Without an slf4j binding such as slf4j-simple ZooKeeper logs nothing.
classpath="/etc/zookeeper/conf:$jar"
[ -f /usr/share/java/slf4j-simple.jar ] && classpath="$classpath:/usr/share/java/slf4j-simple.jar"
# shellcheck disable=SC2086  # ZK_HEAP_OPTS may hold several JVM options
strom_launch zookeeper "$(basename "$config" .properties)" "$daemon" \
    java ${ZK_HEAP_OPTS:--Xmx512m} -cp "$classpath" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
