#!/usr/bin/env bash
# Start one broker: bin/kafka-server-start.sh [-daemon] CONFIG [--override property=value]...
# A thin wrapper over `python -m broker`, with Kafka's script's arguments. In the foreground
# unless -daemon (then output goes to data/logs/broker-NAME.out). The pid is recorded in
# data/run/broker-NAME.pid (NAME: the config file's name without .properties) for
# bin/stop-cluster.sh ($STROM_DATA_DIR/run and /logs instead of data/ when it is set). Runs from
# the repository root: relative paths inside CONFIG (log.dirs) are resolved against it.
set -euo pipefail
usage() { echo "USAGE: $0 [-daemon] server.properties [--override property=value]*" >&2; exit 1; }
daemon=0
if [ "${1:-}" = "-daemon" ]; then daemon=1; shift; fi
[ $# -ge 1 ] || usage
[ -f "$1" ] || { echo "$0: no such config file: $1" >&2; exit 1; }
config="$(realpath -- "$1")"
shift
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

[ -x "$STROM_VENV/bin/python" ] || strom_setup_python
strom_launch broker "$(basename "$config" .properties)" "$daemon" \
    "$STROM_VENV/bin/python" -m broker "$config" "$@"
