#!/usr/bin/env bash
# Set up what the tests need (idempotent; fast when nothing changed) and run pytest.
#   bin/run-tests.sh                      the default suite
#   bin/run-tests.sh -q tests/unit -k x   any pytest arguments are passed through
# Exit code: pytest's. Its 5 ("no tests collected") is a failure too, and said so.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

# The run may hold the container tests: no test path given (the default suite), or one
# under tests/containers (or tests itself). `bin/run-tests.sh tests/unit` builds no image.
wants_containers() {
    local arg paths=0
    for arg in "$@"; do
        case "$arg" in
            tests|tests/|tests/containers*|./tests|./tests/|./tests/containers*) return 0 ;;
            tests/*|./tests/*) paths=1 ;;
        esac
    done
    [ "$paths" = 0 ]
}

strom_setup
strom_setup_node
# Compiled modules beside the sources: where PYTHONDONTWRITEBYTECODE is set (as in some CI
# images), every Python the tests start (brokers, tools, clients) would compile strom's
# ~400 modules again; this once costs about 2 s.
"$STROM_VENV/bin/python" -m compileall -q -j 0 broker zkcoord clients spark_jobs tests bench >/dev/null
# The container and network-fault tests: docker, debootstrap, iptables, a running dockerd and
# the strom image, rebuilt when older than the sources (bin/build-image.sh prints its time).
# Without them those tests skip; under CI they are required, so the run fails here, at once.
if wants_containers "$@" && ! { strom_setup_containers && bin/build-image.sh; }; then
    if [[ "${CI:-}" =~ ^([Tt]rue|TRUE|1)$ ]]; then
        say "the container tests' prerequisites are missing under CI (CI=true): failing"
        exit 1
    fi
    say "no Docker or no strom image: the container tests will be skipped"
fi
say "running: $STROM_VENV/bin/python -m pytest $*"
rc=0
"$STROM_VENV/bin/python" -m pytest "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    say "pytest collected no tests (exit 5): failing"
fi
exit "$rc"
