#!/usr/bin/env bash
# strom-verify: a Jepsen-style durability check against any Kafka-compatible cluster
# (python -m broker.testing.verify.cli; docs/TESTING.md).
# Usage: bin/strom-verify.sh --bootstrap-server HOST:PORT [--rate R] [--duration S] [--acks all|1]
#        [--faults kill9,pause,leader-ahead --cluster-dir DIR] [--json]   (--help for the rest)
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" broker.testing.verify.cli "$@"
