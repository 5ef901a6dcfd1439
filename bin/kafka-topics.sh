#!/usr/bin/env bash
# kafka-topics: strom's version of Kafka's tool of that name (python -m clients.cli.topics).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.topics "$@"
