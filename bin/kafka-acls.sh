#!/usr/bin/env bash
# kafka-acls: strom's version of Kafka's tool of that name (python -m clients.cli.acls).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.acls "$@"
