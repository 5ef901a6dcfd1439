"""log.writeback.interval.bytes reaches a running broker's logs (broker/log/write_behind.py):
its /metrics count the bytes whose writeback it started; with 0 it starts none. What the
kernel then holds dirty is tests/unit/test_write_behind.py's (here another test's writes
can make the kernel write every file back by itself, and hide the difference)."""
from __future__ import annotations

import os
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import free_port

pytestmark = [pytest.mark.integration]

MiB = 1 << 20
PAGE = 4096


def _create(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("wb", num_partitions=1, replication_factor=1)])["wb"].result(30)


def _produce_8_mib(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "compression.type": "none", "log_level": 0})
    value = os.urandom(8 << 10)
    for _ in range(1024):
        p.produce("wb", value, partition=0)
        p.poll(0)
    assert p.flush(30) == 0


def _started_bytes(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("strom_log_writeback_started_bytes_total"))


def _segment(broker) -> str:
    return str(broker.log_dir / "wb-0" / f"{0:020d}.log")


@pytest.mark.parametrize("interval", [MiB, 0])
def test_the_broker_starts_the_writeback_of_each_interval_appended(broker_factory, interval):
    port = free_port()
    b = broker_factory({"log.writeback.interval.bytes": str(interval), "metrics.port": str(port)})
    _create(b.bootstrap)
    _produce_8_mib(b.bootstrap)
    size = os.path.getsize(_segment(b))
    assert size >= 8 * MiB
    started = _started_bytes(port)
    if interval:
        # Every whole interval appended, counted as it is handed to the writeback thread.
        assert size - interval - PAGE <= started <= size
    else:
        assert started == 0
