#!/usr/bin/env bash
# strom-metrics: a one-screen cluster summary from the brokers' /metrics.json (python -m clients.cli.strom_metrics).
# Usage: bin/strom-metrics.sh --bootstrap-server HOST:PORT [--watch [SECONDS]] [--count N]
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.cli.strom_metrics "$@"
