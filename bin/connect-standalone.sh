#!/usr/bin/env bash
# connect-standalone: a Kafka Connect worker in standalone mode (python -m clients.connect.main standalone).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.connect.main standalone "$@"
