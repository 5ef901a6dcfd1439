#!/usr/bin/env bash
# strom-verify: a Jepsen-style durability check against any Kafka-compatible cluster
# (python -m broker.testing.verify.cli; docs/TESTING.md).
# Usage: bin/strom-verify.sh --bootstrap-server HOST:PORT [--rate R] [--duration S] [--acks all|1]
#        [--faults kill9,pause,leader-ahead --cluster-dir DIR] [--json]   (--help for the rest)
#        bin/strom-verify.sh --netns-cluster 3 --faults isolate-leader,bridge,kill9
#        (as root: its own cluster in network namespaces, for the partition faults)
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" broker.testing.verify.cli "$@"
