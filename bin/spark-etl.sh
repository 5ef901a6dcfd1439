#!/usr/bin/env bash
# spark-etl: run one of strom's PySpark ETL jobs, or their data generator.
#
#   bin/spark-etl.sh geo_locations --bootstrap-server H:P --checkpoint DIR --output DIR [...]
#   bin/spark-etl.sh log_levels    --bootstrap-server H:P --checkpoint DIR --output DIR [...]
#   bin/spark-etl.sh generate location|logs --bootstrap-server H:P [--records N] [--seed S]
#   bin/spark-etl.sh JOB --help
#
# Runs with the repository's .venv python (created by bin/_setup.sh if missing) from the
# caller's directory, so relative --checkpoint/--output paths work as given. Spark's Python
# workers run the same interpreter (PYSPARK_PYTHON), with the repository on PYTHONPATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PY="$ROOT/.venv/bin/python"
JOBS="geo_locations | log_levels | generate"
usage() { echo "usage: $(basename "$0") JOB [--help | ARGS...]   (JOB: $JOBS)"; }
if [ $# -eq 0 ]; then
    usage >&2
    exit 2
fi
case "$1" in
    geo_locations | log_levels | generate) JOB=$1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$(basename "$0"): unknown job '$1' (JOB: $JOBS)" >&2; exit 2 ;;
esac
shift
if [ ! -x "$PY" ]; then
    # shellcheck source=bin/_setup.sh
    (cd "$ROOT" && source bin/_setup.sh && strom_setup_python) >&2
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PY}" PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}"
exec "$PY" -m "spark_jobs.$JOB" "$@"
