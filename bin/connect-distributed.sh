#!/usr/bin/env bash
# connect-distributed: a Kafka Connect worker in distributed mode (python -m clients.connect.main distributed).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.connect.main distributed "$@"
