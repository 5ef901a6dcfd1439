#!/usr/bin/env bash
# Stop what the bin/ scripts started from this checkout: first the brokers, then ZooKeeper
# (so that brokers can still deregister), as recorded in data/run/*.pid. Stale pid files
# (the process is gone, or the pid now belongs to something else) are removed untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

stop_kind() {
    local kind=$1 file pid pids=()
    for file in data/run/"$kind"-*.pid; do
        [ -e "$file" ] || continue
        if pid="$(strom_pid_of "$file")"; then
            say "stopping $(basename "$file" .pid) (pid $pid)"
            pids+=("$pid")
        fi
        rm -f "$file"
    done
    [ ${#pids[@]} -eq 0 ] || strom_stop "${pids[@]}"
}

stop_kind broker
stop_kind zookeeper
say "stopped"
