"""PySpark for strom: the `.format("strom")` data source and sink (`spark_jobs.source`),
the session helper (`spark_jobs.session.strom_spark_session`) and the ETL jobs.

Importing this package does not import pyspark (the data generator and `--help` run
without it)."""
