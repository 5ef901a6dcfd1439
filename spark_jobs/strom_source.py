"""`.format("strom")` for PySpark: re-exports the data source of `spark_jobs.source`."""
from spark_jobs.source import DataLossError, StromDataSource

__all__ = ["StromDataSource", "DataLossError"]
