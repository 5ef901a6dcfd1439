#!/usr/bin/env bash
# kafka-log-dirs: strom's version of Kafka's tool of that name (python -m clients.cli.log_dirs).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.log_dirs "$@"
