#!/usr/bin/env bash
# kafka-configs: strom's version of Kafka's tool of that name (python -m clients.cli.configs).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.configs "$@"
