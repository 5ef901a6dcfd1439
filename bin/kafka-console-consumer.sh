#!/usr/bin/env bash
# kafka-console-consumer: strom's version of Kafka's tool of that name (python -m clients.cli.console_consumer).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.console_consumer "$@"
