"""A client in another language produces and consumes through the proxy: Node.js with only
its built-in fetch (tests/js/rest_fetch_client.mjs) writes keyed records through v2's
POST /topics/{topic} and reads them back through a v2 consumer instance that commits and is
deleted. confluent-kafka then finds the same records (key, value, partition, offset) in the
topic and the group's commit at the end of every partition."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "js" / "rest_fetch_client.mjs"
NODE = shutil.which("node")
COUNT = 30


@pytest.fixture(autouse=True)
def node_installed() -> None:
    if NODE is not None:
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail("node is not installed")    # in CI a missing runtime is a broken set-up
    pytest.skip("node is not installed")


def test_node_fetch_produces_and_consumes_through_the_proxy(rest_env: Any) -> None:
    topic, group = "node-fetch", "node-fetch-group"
    admin = AdminClient({"bootstrap.servers": rest_env.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    assert NODE is not None
    run = subprocess.run([NODE, str(SCRIPT), rest_env.url, topic, group, str(COUNT)],
                         capture_output=True, text=True, timeout=90)
    lines = run.stdout.strip().splitlines()
    out = json.loads(lines[-1]) if lines else {}
    assert run.returncode == 0 and "error" not in out, (out, run.stderr[-2000:])

    # Node read every record it wrote, once, with its key and value.
    produced = {(o["partition"], o["offset"]) for o in out["produced"]}
    assert len(out["produced"]) == len(produced) == COUNT
    consumed = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in out["consumed"]}
    assert len(out["consumed"]) == len(consumed) == COUNT
    assert set(consumed) == produced
    assert sorted(consumed.values()) == sorted(
        (f"node-key-{i}", f"node-value-{i} ✓") for i in range(COUNT))
    assert all(r["topic"] == topic for r in out["consumed"])
    assert out["assignment"] == [{"topic": topic, "partition": p} for p in range(3)]

    # confluent-kafka sees the same records, and the instance's commit at every partition's end.
    c = Consumer({"bootstrap.servers": rest_env.bootstrap, "group.id": "node-fetch-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(3)])
        seen: dict[tuple[int, int], tuple[str, str]] = {}
        for _ in range(100):
            if len(seen) == COUNT:
                break
            for m in c.consume(COUNT, timeout=0.5):
                assert m.error() is None, m.error()
                partition, offset, key, value = m.partition(), m.offset(), m.key(), m.value()
                assert None not in (partition, offset, key, value)
                seen[(partition, offset)] = (key.decode(), value.decode())  # type: ignore
        assert seen == consumed
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(3)}
    finally:
        c.close()
    assert sum(ends.values()) == COUNT
    wanted = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(3)])
    committed = admin.list_consumer_group_offsets([wanted])[group].result(10).topic_partitions
    assert {tp.partition: tp.offset for tp in committed} == ends
