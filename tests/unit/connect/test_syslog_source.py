"""The syslog source task on a real UDP socket on 127.0.0.1, run directly in asyncio (no
broker, no worker): everything sent is accounted for (received + dropped by the queue +
dropped by the kernel == sent), records have the parsed value, the host key and the
message's time, a full queue and a full socket buffer are counted, and the connector's
config is Kafka-style (one task only)."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clients.connect.api import SourceRecord
from clients.connect.config_def import ConfigException
from clients.connect.connectors.syslog_parser import parse_syslog_timed
from clients.connect.connectors.syslog_source import (SyslogSourceConnector, SyslogSourceTask,
                                                      socket_drops)
from clients.connect.data import Schema
from tests.support.syslog_sender import expected_counts, make_mix, send_datagrams

REPO = Path(__file__).resolve().parents[3]
BASE = {"topic": "logs", "syslog.host": "127.0.0.1", "syslog.port": "0"}


async def started(**overrides: str) -> SyslogSourceTask:
    task = SyslogSourceTask()
    await task.start({**BASE, **overrides})
    task.socket_drops_every_s = 0      # read the kernel's counter on every metrics() call
    return task


def accounted(m: dict[str, float]) -> float:
    return (m["syslog_datagrams_received_total"] + m["syslog_datagrams_dropped_total"]
            + m["syslog_socket_drops_total"])


async def poll_until_accounted(task: SyslogSourceTask, sent: int,
                               deadline_s: float = 5.0) -> list[SourceRecord]:
    """Poll until every sent datagram is counted somewhere and the queue is empty (poll()
    returned None: nothing came for its whole wait)."""
    records: list[SourceRecord] = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        batch = await task.poll()
        records.extend(batch or [])
        if batch is None and accounted(task.metrics()) >= sent:
            return records
    raise AssertionError(f"only {task.metrics()} of {sent} sent accounted for")


async def sender_process(port: int, count: int, rate: int, malformed_every: int,
                         seed: int) -> dict[str, Any]:
    """The sender as its command line runs it; its JSON summary."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.syslog_sender", "--host", "127.0.0.1",
        "--port", str(port), "--count", str(count), "--rate", str(rate),
        "--malformed-every", str(malformed_every), "--seed", str(seed),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("policy", ["record", "drop"])
def test_everything_sent_arrives_parsed_or_malformed(policy):
    count, every, seed = 1500, 10, 7

    async def main() -> tuple[dict[str, Any], list[SourceRecord], dict[str, float], int]:
        task = await started(**{"malformed.policy": policy, "batch.size": "300"})
        try:
            sender = asyncio.create_task(sender_process(task.port, count, 5000, every, seed))
            records = await poll_until_accounted(task, count, deadline_s=8.0)
            summary = await sender
            records += await poll_until_accounted(task, count)
            return summary, records, task.metrics(), task.port
        finally:
            await task.stop()

    summary, records, m, port = asyncio.run(main())
    expected = expected_counts(count, every, seed)
    assert summary["sent"] == count and summary["malformed"] == expected["malformed"] == 150
    assert summary["by_format"] == expected["by_format"]
    assert m["syslog_port"] == port > 0
    assert accounted(m) == count
    assert m["syslog_datagrams_parsed_total"] + m["syslog_datagrams_malformed_total"] \
        == m["syslog_datagrams_received_total"]
    # 5000/s on loopback fits the socket buffer and the queue: nothing may be lost.
    assert (m["syslog_datagrams_dropped_total"], m["syslog_socket_drops_total"]) == (0, 0)
    assert m["syslog_datagrams_received_total"] == count
    assert m["syslog_datagrams_malformed_total"] == 150
    assert m["syslog_datagrams_parsed_total"] == count - 150

    good = [r for r in records if "malformed" not in r.value]
    bad = [r for r in records if "malformed" in r.value]
    assert len(bad) == (150 if policy == "record" else 0)
    assert len(good) == count - 150
    by_format: dict[str, int] = {}
    by_level: dict[str, int] = {}
    for r in good:
        by_format[r.value["format"]] = by_format.get(r.value["format"], 0) + 1
        by_level[r.value["level"]] = by_level.get(r.value["level"], 0) + 1
    assert by_format == expected["by_format"] and by_level == expected["by_level"]
    # Datagrams arrive in the order sent (one sender, loopback), so each record's value is
    # what the parser makes of its datagram at the time it was received.
    wanted = make_mix(count, every, seed).datagrams
    if policy == "drop":
        wanted = [d for i, d in enumerate(wanted) if (i + 1) % every]
    assert len(records) == len(wanted)
    for record, datagram in zip(records, wanted):
        assert isinstance(record, SourceRecord) and record.topic == "logs"
        assert record.kafka_partition is None and record.value_schema is None
        assert record.key_schema == Schema.OPTIONAL_STRING_SCHEMA
        assert record.source_partition is None and record.source_offset is None
        assert record.key == record.value["host"]
        assert record.timestamp is not None
        if "malformed" in record.value:
            assert record.value["host"] == "127.0.0.1" and record.value["reason"]
            assert record.value["message"] == datagram.decode("utf-8", "replace")
            assert abs(record.timestamp - time.time() * 1000) < 60_000
            continue
        # A BSD timestamp's year comes from `now`; the mix's are all in June, so the year
        # of the record's own time is the one the task used.
        ms, value = parse_syslog_timed(datagram, record.timestamp / 1000, "127.0.0.1")
        assert (record.timestamp, record.value) == (ms, value)
    assert json.loads(json.dumps([r.value for r in records])) == [r.value for r in records]


def test_a_full_queue_drops_and_counts():
    async def main() -> None:
        task = await started(**{"queue.max": "10"})
        try:
            datagrams = make_mix(300, 0, 1).datagrams
            # Sent from a thread so the receive loop runs meanwhile; nothing polls.
            await asyncio.to_thread(send_datagrams, datagrams, "127.0.0.1", task.port, 20000)
            deadline = time.monotonic() + 5
            while accounted(task.metrics()) < 300 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            m = task.metrics()
            assert m["syslog_datagrams_received_total"] == 10        # the queue holds 10
            assert m["syslog_datagrams_dropped_total"] == 290 - m["syslog_socket_drops_total"] > 0
            records = await task.poll()
            assert records is not None and len(records) == 10
            assert [r.value["message"] for r in records] == \
                [parse_syslog_timed(d)[1]["message"] for d in datagrams[:10]]
            # Room again: the next datagrams are received.
            await asyncio.to_thread(send_datagrams, datagrams[:5], "127.0.0.1", task.port, 0)
            more = await poll_until_accounted(task, 305)
            assert len(more) == 5
            assert task.metrics()["syslog_datagrams_received_total"] == 15
        finally:
            await task.stop()

    asyncio.run(main())


@pytest.mark.skipif(not os.path.exists("/proc/net/udp"), reason="needs Linux /proc/net/udp")
def test_kernel_drops_are_read_from_proc_net_udp():
    async def main() -> None:
        # The smallest receive buffer the kernel allows, and a blocked loop while sending:
        # the kernel must drop most of the burst, and count it for this socket.
        task = await started(**{"syslog.receive.buffer.bytes": "1"})
        try:
            datagrams = make_mix(500, 0, 2).datagrams
            send_datagrams(datagrams, "127.0.0.1", task.port, 0)     # blocks the loop
            records = await poll_until_accounted(task, 500)
            m = task.metrics()
            assert m["syslog_socket_drops_total"] > 0
            assert accounted(m) == 500
            assert m["syslog_datagrams_dropped_total"] == 0
            assert len(records) == m["syslog_datagrams_received_total"] < 500
        finally:
            await task.stop()

    asyncio.run(main())


def test_socket_drops_of_an_unknown_socket_is_zero():
    assert socket_drops(None) == 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        assert socket_drops(os.fstat(s.fileno()).st_ino) == 0       # a fresh socket
    assert socket_drops(1) == 0                                      # no such inode


def test_poll_without_datagrams_returns_none_after_a_short_wait():
    async def main() -> None:
        task = await started()
        try:
            start = time.monotonic()
            assert await task.poll() is None
            assert 0.05 <= time.monotonic() - start < 1.0
            assert task.metrics()["syslog_datagrams_received_total"] == 0
        finally:
            await task.stop()

    asyncio.run(main())


def test_a_taken_port_fails_start():
    async def main() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            with pytest.raises(OSError):
                await SyslogSourceTask().start({**BASE, "syslog.port": str(s.getsockname()[1])})

    asyncio.run(main())


# ------------------------------------------------------------------ the connector

def test_connector_config_defaults_and_one_task():
    c = SyslogSourceConnector()
    assert c.KAFKA_NAME == "io.strom.connect.syslog.SyslogSourceConnector"
    parsed = c.config().parse({"topic": "logs"})
    assert (parsed["syslog.host"], parsed["syslog.port"], parsed["syslog.format"],
            parsed["batch.size"], parsed["queue.max"], parsed["malformed.policy"]) == \
        ("0.0.0.0", 5514, "auto", 2000, 100000, "record")
    props = {"topic": "logs", "syslog.port": "0", "tasks.max": "1"}
    c.start(props)
    assert c.task_configs(5) == [props]
    assert c.task_class() is SyslogSourceTask
    c.stop()


@pytest.mark.parametrize("props,key", [
    ({}, "topic"),
    ({"topic": "logs", "syslog.format": "rfc9999"}, "syslog.format"),
    ({"topic": "logs", "malformed.policy": "keep"}, "malformed.policy"),
    ({"topic": "logs", "syslog.port": "70000"}, "syslog.port"),
    ({"topic": "logs", "queue.max": "0"}, "queue.max"),
    ({"topic": "logs", "tasks.max": "2"}, "tasks.max"),
])
def test_connector_refuses_bad_config(props, key):
    c = SyslogSourceConnector()
    with pytest.raises(ConfigException) as e:
        c.start(props)
    assert e.value.key == key
    errors = {v.name: v.errors for v in c.validate(props) if v.errors}
    assert list(errors) == [key]
