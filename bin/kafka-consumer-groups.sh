#!/usr/bin/env bash
# kafka-consumer-groups: strom's version of Kafka's tool of that name (python -m clients.cli.consumer_groups).
# Runs with the repository's .venv python (created by bin/_setup.sh if missing) from the
# caller's directory, so relative paths in the arguments (config files) work as given.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ]; then
    # shellcheck source=bin/_setup.sh
    (cd "$ROOT" && source bin/_setup.sh && strom_setup_python) >&2
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m clients.cli.consumer_groups "$@"
