"""`strom_spark_session`: a SparkSession that can read and write `.format("strom")`.

What it takes care of, so jobs and tests do not each rediscover it:
  - Spark's Python workers run this interpreter (PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON =
    sys.executable): the system python has no pyarrow and no strom client;
  - PYTHONPATH holds the repository root, so workers import `spark_jobs` and `clients`
    (local mode: workers inherit the JVM's environment, which inherits ours);
  - small shuffles (spark.sql.shuffle.partitions = 2 by default), no UI, quiet logs;
  - `spark.dataSource.register(StromDataSource)`.

Any Spark setting can be given as a keyword: `strom_spark_session("job", **{
"spark.sql.shuffle.partitions": "4"})`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["strom_spark_session", "REPO_ROOT", "worker_environment"]

REPO_ROOT = Path(__file__).resolve().parents[1]

_DEFAULTS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # Arrow batches from the source go to the JVM as they are; bigger ones cost less.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
}


def worker_environment() -> dict[str, str]:
    """The environment variables Spark's Python workers need (also set in os.environ)."""
    paths = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                if p and p != str(REPO_ROOT)]
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(paths)}


def strom_spark_session(app_name: str, master: str = "local[2]",
                        **conf: Any) -> SparkSession:
    """A SparkSession (created, or the active one reconfigured) with StromDataSource
    registered as "strom". `conf`: Spark settings by their dotted names."""
    env = worker_environment()
    os.environ.update(env)                  # before the JVM starts: it passes them on
    from pyspark.sql import SparkSession

    from spark_jobs.source import StromDataSource

    builder = SparkSession.builder.appName(app_name).master(master)
    settings = {**_DEFAULTS, "spark.pyspark.python": sys.executable,
                "spark.pyspark.driver.python": sys.executable,
                "spark.executorEnv.PYTHONPATH": env["PYTHONPATH"],
                **{k: str(v) for k, v in conf.items()}}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(str(conf.get("log.level", "ERROR")))
    spark.dataSource.register(StromDataSource)
    return spark
