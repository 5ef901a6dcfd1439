#!/usr/bin/env bash
# bin/_run-module.sh MODULE ARGS...: `python -m MODULE ARGS...` with the repository's .venv
# python (created by bin/_setup.sh if missing), from the caller's directory so relative
# paths in the arguments (config files) work as given. The tool wrappers in bin/ call it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PY="$ROOT/.venv/bin/python"
if [ ! -x "$PY" ]; then
    # shellcheck source=bin/_setup.sh
    (cd "$ROOT" && source bin/_setup.sh && strom_setup_python) >&2
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m "$@"
