#!/usr/bin/env bash
# Set up what the tests need (idempotent; fast when nothing changed) and run pytest.
#   bin/run-tests.sh                      the default suite
#   bin/run-tests.sh -q tests/unit -k x   any pytest arguments are passed through
#   STROM_TEST_WORKERS=1 bin/run-tests.sh one pytest process (the default runs two parts: below)
# Exit code: pytest's (the first failing part's). Its 5 ("no tests collected") is a failure
# too, and said so.
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
# Two parts (tests/conftest.py says which test goes where): the tests not marked `alone` on
# STROM_TEST_WORKERS processes (pytest-xdist; default the cores, at most 4), then the `alone`
# ones, which bound a time or a rate, with nothing beside them. STROM_TEST_WORKERS=1, or a
# -n, -m or -p of your own, makes it one plain pytest run of what you asked for.
workers="${STROM_TEST_WORKERS:-$(nproc)}"
[ "$workers" -gt 4 ] && workers=4
for arg in "$@"; do
    case "$arg" in -n|-n*|--numprocesses*|--dist*|-m|-m*|-p|-p*) workers=1 ;; esac
done

run_pytest() {
    say "running: $STROM_VENV/bin/python -m pytest $*"
    local rc=0
    "$STROM_VENV/bin/python" -m pytest "$@" || rc=$?
    return "$rc"
}

started=$SECONDS
if [ "$workers" -le 1 ]; then
    rc=0
    run_pytest "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        say "pytest collected no tests (exit 5): failing"
    fi
    exit "$rc"
fi
rc_parallel=0
run_pytest -n "$workers" --dist loadgroup -m "not alone" "$@" || rc_parallel=$?
parallel_s=$((SECONDS - started))
rc_alone=0
run_pytest -m alone "$@" || rc_alone=$?
say "the parallel part ($workers workers): exit $rc_parallel in ${parallel_s}s;" \
    "the alone part: exit $rc_alone in $((SECONDS - started - parallel_s))s; all: $((SECONDS - started))s"
# Exit 5 is "no tests collected": fine for one part when the other ran tests.
if [ "$rc_parallel" -eq 5 ] && [ "$rc_alone" -eq 5 ]; then
    say "pytest collected no tests (exit 5): failing"
    exit 5
fi
for rc in "$rc_parallel" "$rc_alone"; do
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
        exit "$rc"
    fi
done
exit 0
