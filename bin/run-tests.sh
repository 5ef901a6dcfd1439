#!/usr/bin/env bash
# Set up what the tests need (idempotent; fast when nothing changed) and run pytest.
#   bin/run-tests.sh                      the default suite
#   bin/run-tests.sh -q tests/unit -k x   any pytest arguments are passed through
# Exit code: pytest's. Its 5 ("no tests collected") is a failure too, and said so.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

strom_setup
strom_setup_node
say "running: $STROM_VENV/bin/python -m pytest $*"
rc=0
"$STROM_VENV/bin/python" -m pytest "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    say "pytest collected no tests (exit 5): failing"
fi
exit "$rc"
