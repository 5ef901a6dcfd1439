#!/usr/bin/env bash
# kafka-console-producer: strom's version of Kafka's tool of that name (python -m clients.cli.console_producer).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.console_producer "$@"
