#!/usr/bin/env bash
# kafka-consumer-perf-test: strom's version of Kafka's tool of that name (python -m clients.cli.consumer_perf).
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.consumer_perf "$@"
