"""Connect's Kafka-backed stores against a real broker: what one instance writes a second
one reads back (and follows while running); the config topic refuses a topic that is not
compacted or has several partitions, with Kafka's messages; offsets a transactional
producer writes (as exactly-once source tasks do) appear to a read_committed store only
once committed, never when aborted."""
from __future__ import annotations

import asyncio
from typing import Any, Coroutine

import pytest

from clients.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer
from clients.connect.api import ConnectError
from clients.connect.runtime.config_store import (ConnectorConfigUpdated, KafkaConfigStore,
                                                  TargetStateChanged, TasksCommitted)
from clients.connect.runtime.offset_store import KafkaOffsetStore, offset_key, offset_value
from clients.connect.runtime.status_store import ConnectorStatus, KafkaStatusStore, TaskStatus
from clients.types import NewTopic, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


async def raw_records(bootstrap: str, topic: str) -> list[tuple[Any, Any]]:
    """(key, value) of every record of partition 0, read by a plain consumer."""
    async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False) as c:
        tp = TopicPartition(topic, 0)
        await c.assign([tp])
        end = (await c.end_offsets([tp]))[tp]
        out: list[tuple[Any, Any]] = []
        while await c.position(tp) < end:
            out += [(r.key, r.value) for r in await c.poll(1.0)]
        return out


def test_each_store_reads_back_what_another_instance_wrote(broker):
    cfg = {"bootstrap.servers": broker.bootstrap, "client.id": "connect-test"}

    async def main() -> None:
        # ---- offsets
        offsets = KafkaOffsetStore(cfg, "connect-offsets", partitions=3)
        await offsets.start()
        await offsets.write("src", [({"filename": "/a"}, {"position": 10}),
                                    ({"filename": "/b"}, {"position": 20})])
        assert offsets.get("src", {"filename": "/a"}) == {"position": 10}   # its own write
        await offsets.write("src", [({"filename": "/b"}, None)])
        offsets2 = KafkaOffsetStore(cfg, "connect-offsets", partitions=3)
        await offsets2.start()
        assert offsets2.log.partitions == 3
        assert offsets2.connector_offsets("src") == [({"filename": "/a"}, {"position": 10})]
        await offsets.write("src", [({"filename": "/a"}, {"position": 11})])
        await offsets2.read_to_end()                  # follows the other worker's writes
        assert offsets2.get("src", {"filename": "/a"}) == {"position": 11}

        # ---- configs
        configs = KafkaConfigStore(cfg, "connect-configs")
        await configs.start()
        await configs.put_connector_config("c1", {"name": "c1", "tasks.max": "2"})
        await configs.put_task_configs("c1", [{"task": "0"}, {"task": "1"}])
        await configs.put_connector_config("c2", {"name": "c2"}, target_state="PAUSED")
        configs2 = KafkaConfigStore(cfg, "connect-configs")
        events: list[Any] = []
        configs2.add_listener(events.append)
        await configs2.start()
        assert events == []                           # the initial read fires nothing
        snap = configs2.snapshot()
        assert snap == configs.snapshot()
        assert snap.connectors() == ["c1", "c2"] and snap.offset == 6
        assert snap.task_configs["c1"] == [{"task": "0"}, {"task": "1"}]
        assert snap.target_states == {"c1": "STARTED", "c2": "PAUSED"}
        await configs.put_target_state("c1", "STOPPED")
        await configs.put_task_configs("c2", [{"task": "x"}])
        await configs.remove_connector_config("c1")
        await configs2.read_to_end()
        assert configs2.snapshot().connectors() == ["c2"]
        assert configs2.snapshot().task_configs == {"c2": [{"task": "x"}]}
        assert events[:2] == [TargetStateChanged("c1", "STOPPED"), TasksCommitted("c2")]
        assert [type(e).__name__ for e in events[2:]] == ["ConnectorRemoved"]
        # The topic holds Kafka's records, byte for byte.
        raw = await raw_records(broker.bootstrap, "connect-configs")
        assert raw[:3] == [(b"connector-c1", b'{"properties":{"name":"c1","tasks.max":"2"}}'),
                           (b"task-c1-0", b'{"properties":{"task":"0"}}'),
                           (b"task-c1-1", b'{"properties":{"task":"1"}}')]
        assert raw[3] == (b"commit-c1", b'{"tasks":2}')
        assert raw[4] == (b"target-state-c2", b'{"state":"PAUSED","state.v2":"PAUSED"}')
        assert raw[-2:] == [(b"connector-c1", None), (b"target-state-c1", None)]

        # ---- statuses
        statuses = KafkaStatusStore(cfg, "connect-status", partitions=2)
        await statuses.start()
        await statuses.put(ConnectorStatus("c2", "RUNNING", None, "w1:8083", 1))
        await statuses.put(TaskStatus(("c2", 0), "FAILED", "boom", "w1:8083", 1))
        await statuses.put_topic("c2", "orders", 0)
        own = statuses.get_connector("c2")                      # its own write, at once
        assert own is not None and own.state == "RUNNING"
        statuses2 = KafkaStatusStore(cfg, "connect-status", partitions=2)
        await statuses2.start()
        assert statuses2.get_connector("c2") == ConnectorStatus("c2", "RUNNING", None,
                                                                "w1:8083", 1)
        assert statuses2.get_all_tasks("c2") == [TaskStatus(("c2", 0), "FAILED", "boom",
                                                             "w1:8083", 1)]
        assert statuses2.topics("c2") == ["orders"]
        # An older generation of another worker does not overwrite (put_safe) ...
        assert not await statuses2.put_safe(ConnectorStatus("c2", "UNASSIGNED", None,
                                                            "w2:8083", 0))
        await statuses.delete_connector("c2")
        await statuses.delete_topics("c2")
        await statuses2.read_to_end()
        assert statuses2.connectors() == set() and statuses2.get_all_tasks("c2") == []
        assert statuses2.topics("c2") == []

        for store in (offsets, offsets2, configs, configs2, statuses, statuses2):
            await store.stop()
    run(main())


def test_config_topic_must_be_compacted_with_one_partition(broker):
    cfg = {"bootstrap.servers": broker.bootstrap}

    async def main() -> None:
        async with AsyncAdminClient(cfg) as admin:
            await admin.create_topics([
                NewTopic("plain-configs", 1, 1, {"cleanup.policy": "delete"}),
                NewTopic("wide-configs", 2, 1, {"cleanup.policy": "compact"})])
        store = KafkaConfigStore(cfg, "plain-configs")
        with pytest.raises(ConnectError) as e:
            await store.start()
        assert str(e.value) == (
            "Topic 'plain-configs' supplied via the 'config.storage.topic' property is "
            "required to have 'cleanup.policy=compact' to guarantee consistency and "
            "durability of connector configurations, but found the topic currently has "
            "'cleanup.policy=delete'. Continuing would likely result in eventually losing "
            "connector configurations and problems restarting this Connect cluster in the "
            "future. Change the 'config.storage.topic' property in the Connect worker "
            "configurations to use a topic with 'cleanup.policy=compact'.")
        with pytest.raises(ConnectError, match=r"^Topic 'wide-configs' supplied via the "
                           r"'config.storage.topic' property is required to have a single "
                           r"partition in order to guarantee consistency of connector "
                           r"configurations, but found 2 partitions\.$"):
            await KafkaConfigStore(cfg, "wide-configs").start()
        # A topic the store creates is compacted.
        created = KafkaConfigStore(cfg, "new-configs")
        await created.start()
        await created.stop()
        async with AsyncAdminClient(cfg) as admin:
            entries = await admin.describe_configs("topic", "new-configs", ["cleanup.policy"])
        assert entries["cleanup.policy"].value == "compact"
    run(main())


def test_transactional_offsets_appear_only_when_committed(broker):
    cfg = {"bootstrap.servers": broker.bootstrap}
    partition = {"filename": "/var/log/app.log"}

    async def main() -> None:
        reader = KafkaOffsetStore(cfg, "connect-offsets", partitions=2)
        await reader.start()
        producer = AsyncProducer(cfg, transactional_id="connect-cluster-src-0")
        await producer.init_transactions()

        async def transaction(position: int, commit: bool) -> None:
            await producer.begin_transaction()
            sent = await producer.send(reader.topic, offset_value({"position": position}),
                                       key=offset_key("src", partition))
            await producer.flush()
            md = await sent
            await reader.read_to_end()                # open: beyond the last stable offset
            assert reader.log.offsets()[md.partition] <= md.offset
            assert reader.get("src", partition) == (None if position == 100 else
                                                    {"position": 100})
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
            # The coordinator writes the markers after EndTxn is answered: wait until the
            # reader is past this transaction's marker (the offset after the record).
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            while reader.log.offsets()[md.partition] < md.offset + 2:
                assert loop.time() < deadline, "the transaction marker was never read"
                await asyncio.sleep(0.05)
                await reader.read_to_end()

        await transaction(100, commit=True)
        assert reader.get("src", partition) == {"position": 100}
        await transaction(200, commit=False)
        assert reader.get("src", partition) == {"position": 100}
        await producer.close()

        late = KafkaOffsetStore(cfg, "connect-offsets", partitions=2)
        await late.start()                            # reads the log from the beginning
        assert late.connector_offsets("src") == [(partition, {"position": 100})]
        await late.stop()
        await reader.stop()
    run(main())
