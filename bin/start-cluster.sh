#!/usr/bin/env bash
# Set up (as bin/run-tests.sh does) and start strom in the foreground; Ctrl-C stops it.
# For now this is ONE standalone broker (config/server.properties) on 127.0.0.1:9092; the
# three-broker cluster with ZooKeeper (config/server-0..2.properties) replaces it when it lands.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

strom_setup
if [ ! -f broker/__main__.py ]; then
    say "broker/__main__.py is missing: this tree has no runnable broker yet"
    exit 1
fi
strom_launch broker server 0 "$STROM_VENV/bin/python" -m broker config/server.properties
