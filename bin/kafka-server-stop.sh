#!/usr/bin/env bash
# Stop the brokers of this checkout: every `python -m broker` process whose working directory
# is this repository's root (how the bin/ scripts start them) gets SIGTERM; waits up to
# $STROM_STOP_TIMEOUT seconds (30) for them to exit, then SIGKILL. Brokers of other checkouts
# on the same machine are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

pids=()
for dir in /proc/[0-9]*; do
    pid="${dir#/proc/}"
    [ "$pid" = "$$" ] && continue
    cmdline="$(tr '\0' ' ' 2>/dev/null < "$dir/cmdline")" || continue
    [[ " $cmdline" == *" -m broker "* ]] || continue
    [ "$(readlink "$dir/cwd" 2>/dev/null)" = "$STROM_ROOT" ] || continue
    pids+=("$pid")
done
if [ ${#pids[@]} -eq 0 ]; then
    say "no strom broker to stop"
    exit 1  # as Kafka's script: nothing was running
fi
strom_stop "${pids[@]}"
