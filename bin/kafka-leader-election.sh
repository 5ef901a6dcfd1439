#!/usr/bin/env bash
# kafka-leader-election: strom's version of Kafka's tool of that name (python -m clients.cli.leader_election).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.leader_election "$@"
