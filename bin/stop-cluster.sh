#!/usr/bin/env bash
# Stop what bin/start-cluster.sh (and the other bin/ start scripts) started from this checkout:
# first the REST proxy, then every broker, then ZooKeeper (so that brokers can still deregister), by the pids
# recorded in DIR/run/*.pid. Stale pid files (the process is gone, or the pid now belongs to
# something else) are removed untouched.
#
#   bin/stop-cluster.sh [--data-dir DIR]     DIR: as given to bin/start-cluster.sh (./data)
#   bin/stop-cluster.sh --broker ID [--data-dir DIR]   only broker ID (controlled shutdown);
#                                            bin/start-cluster.sh starts it again
#
# Brokers get SIGTERM together and $STROM_STOP_TIMEOUT seconds (30) to shut down before SIGKILL.
set -euo pipefail
usage() {
    sed -n '2,11s/^# \{0,1\}//p' "$0" >&2
    exit "${1:-1}"
}
data_dir="" broker=""
while [ $# -gt 0 ]; do
    case "$1" in
        --data-dir) [ $# -ge 2 ] || usage; data_dir=$2; shift 2 ;;
        --data-dir=*) data_dir=${1#*=}; shift ;;
        --broker) [ $# -ge 2 ] || usage; broker=$2; shift 2 ;;
        --broker=*) broker=${1#*=}; shift ;;
        -h | --help) usage 0 ;;
        *) echo "$0: unknown argument: $1" >&2; usage ;;
    esac
done
# --data-dir is relative to where the script was called from
[ -z "$data_dir" ] || data_dir="$(realpath -m -- "$data_dir")"
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh
[ -n "$data_dir" ] || data_dir="$STROM_ROOT/data"
run_dir="$data_dir/run"

stopped=0
stop_kind() {
    local kind=$1 file pid pids=()
    for file in "$run_dir/$kind"-*.pid; do
        [ -e "$file" ] || continue
        if pid="$(strom_pid_of "$file")"; then
            say "stopping $(basename "$file" .pid) (pid $pid)"
            pids+=("$pid")
        fi
        rm -f "$file"
    done
    [ ${#pids[@]} -eq 0 ] && return 0
    strom_stop "${pids[@]}"
    stopped=$((stopped + ${#pids[@]}))
}

if [ -n "$broker" ]; then
    [[ "$broker" =~ ^[0-9]+$ ]] || { echo "$0: --broker wants a broker id, not '$broker'" >&2; exit 1; }
    # broker-server-ID.pid: the configs are server-ID.properties (secured copies too)
    file="$run_dir/broker-server-$broker.pid"
    if pid="$(strom_pid_of "$file")"; then
        say "stopping broker $broker (pid $pid): controlled shutdown"
        strom_stop "$pid"
        rm -f "$file"
        say "stopped broker $broker; start it again with bin/start-cluster.sh --broker $broker"
        exit 0
    fi
    rm -f "$file"
    say "broker $broker is not running (no live process in $file)"
    exit 1
fi
stop_kind rest
stop_kind broker
stop_kind zookeeper
if [ "$stopped" -eq 0 ]; then
    say "nothing to stop (no running process in $run_dir/*.pid)"
else
    say "stopped"
fi
