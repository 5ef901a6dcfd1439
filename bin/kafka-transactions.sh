#!/usr/bin/env bash
# kafka-transactions: strom's version of Kafka's tool of that name (python -m clients.cli.transactions).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.transactions "$@"
