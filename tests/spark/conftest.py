"""Fixtures of the PySpark tests: one local SparkSession for the whole run (starting one
costs 6-7 s), one broker process shared by the source/sink test modules, and helpers to
create topics and produce records with known contents.

Every Spark driver JVM the tests start (the shared session's, and those of the jobs run as
their own processes) gets JIT_FLAGS, as the test ZooKeeper does: the tests' JVMs live for
seconds to a minute, and on CI's 2 cores C2 compiling competes with Spark's start-up and
first micro-batches (measured: the geo_locations job on 300 records as its own process,
Spark start-up included, 63-75 s -> 38-53 s with other tests running).

Every test here is marked `integration` (real broker processes) and `spark`; the whole
directory is skipped when pyspark or pyarrow is not installed.
"""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from clients import AdminClient, NewTopic, Producer  # noqa: E402
from clients.types import RecordMetadata  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

# C1 only and the serial collector: quicker start for short-lived JVMs (tests/support/
# zookeeper.py starts ZooKeeper so too). Spark's launcher passes SPARK_SUBMIT_OPTS to the
# driver JVM it starts (local mode: the only JVM).
JIT_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: runs local PySpark (tests/spark)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def quick_jvm_start():
    """SPARK_SUBMIT_OPTS with JIT_FLAGS for every Spark JVM started under tests/spark (the
    environment is inherited by job processes), restored afterwards."""
    import os

    before = os.environ.get("SPARK_SUBMIT_OPTS")
    os.environ["SPARK_SUBMIT_OPTS"] = f"{before} {JIT_FLAGS}" if before else JIT_FLAGS
    yield
    if before is None:
        del os.environ["SPARK_SUBMIT_OPTS"]
    else:
        os.environ["SPARK_SUBMIT_OPTS"] = before


@pytest.fixture(scope="session")
def spark():
    """The shared SparkSession (local[2]) with `.format("strom")` registered."""
    from spark_jobs.session import strom_spark_session

    session = strom_spark_session("strom-tests", **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory):
    """One broker for the source and sink tests (topics are per test)."""
    b = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "b0").start()
    yield b
    b.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])


def produce(bootstrap: str, topic: str, records: list[dict], **config) -> list[RecordMetadata]:
    """Send each {value, key, partition, headers, timestamp_ms} and return the metadata,
    in the order given."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, **config) as p:
        futures = [p.send(topic, r.get("value"), key=r.get("key"), partition=r.get("partition"),
                          headers=r.get("headers"), timestamp_ms=r.get("timestamp_ms"))
                   for r in records]
        p.flush()
        return [f.result(30) for f in futures]


def source(spark, bootstrap: str, **options):
    """spark.read.format("strom") with `options` (underscores stand for nothing: give
    Spark's names, e.g. startingOffsets=...)."""
    reader = spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def fill_topic_rows(n: int, partitions: int = 3) -> list[dict]:
    """n records with keys, string values and headers, round-robin over partitions."""
    return [{"value": f"value-{i}".encode(), "key": f"key-{i}".encode(), "partition": i % partitions,
             "headers": [("i", str(i).encode())]} for i in range(n)]
