#!/usr/bin/env bash
# kafka-get-offsets: strom's version of Kafka's tool of that name (python -m clients.cli.get_offsets).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.get_offsets "$@"
