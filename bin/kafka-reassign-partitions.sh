#!/usr/bin/env bash
# kafka-reassign-partitions: strom's version of Kafka's tool of that name (python -m clients.cli.reassign_partitions).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.reassign_partitions "$@"
