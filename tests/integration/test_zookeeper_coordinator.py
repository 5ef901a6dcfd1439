"""ZkMetadataStore against a real ZooKeeper server (Debian's 3.8, started per test).

Several coordinators in one test are separate ZooKeeper sessions (separate kazoo clients),
so races between them are real races at the server. A plain kazoo client plays "another
tool" writing Kafka-format znodes directly.
"""
from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any, Awaitable, Callable

import pytest
from kazoo.client import KazooClient

from clients.protocol.errors import (InvalidPartitionsError, TopicAlreadyExistsError,
                                     UnknownTopicOrPartitionError)
from tests.support.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401  (fixture)
from zkcoord import zk_paths as zp
from zkcoord.store import BrokerInfo, LeaderAndIsr, TopicConfigChanged
from zkcoord.zk_errors import BrokerIdInUseError, ControllerMovedError, StaleZkVersionError
from zkcoord.zk_events import (BrokersChanged, ControllerChanged, IsrChangesNotified,
                               SessionReestablished, TopicDeletionsRequested, TopicsChanged)
from zkcoord.zookeeper import ZkMetadataStore

pytestmark = pytest.mark.timeout(120)
CHROOT = "/strom"


def run(coro: Awaitable[Any], timeout: float = 60.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def wait_until(pred: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or pred}")
        await asyncio.sleep(0.01)


def coordinator(zk: ZooKeeperServer, broker_id: int | None, chroot: str = CHROOT,
                **kw: Any) -> ZkMetadataStore:
    broker = None if broker_id is None else BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    kw.setdefault("session_timeout_ms", 6000)
    kw.setdefault("connection_timeout_ms", 10000)
    return ZkMetadataStore(zk.connect_string_for(chroot), broker, **kw)


class Raw:
    """A plain kazoo client (no chroot unless given), its blocking calls run off the loop."""

    def __init__(self, zk: ZooKeeperServer, chroot: str = CHROOT):
        self.client = KazooClient(hosts=zk.connect_string_for(chroot) if chroot else zk.connect_string)
        self.client.start(10)

    async def __call__(self, method: str, *args: Any, **kw: Any) -> Any:
        return await asyncio.to_thread(getattr(self.client, method), *args, **kw)

    def close(self) -> None:
        self.client.stop()
        self.client.close()


# ------------------------------------------------------------------ cluster id

def test_cluster_id_created_once_and_stable_across_restarts(zookeeper: ZooKeeperServer) -> None:
    async def first() -> set[str]:
        cs = [coordinator(zookeeper, b) for b in (1, 2, 3)]
        await asyncio.gather(*(c.start() for c in cs))      # racing to create /cluster/id
        ids = {c.cluster_id for c in cs}
        await asyncio.gather(*(c.stop() for c in cs))
        return ids

    ids = run(first())
    assert len(ids) == 1
    cluster_id = ids.pop()
    assert len(cluster_id) == 22

    async def again() -> str:
        c = coordinator(zookeeper, 1)
        await c.start()
        raw = Raw(zookeeper)
        try:
            data, _ = await raw("get", zp.CLUSTER_ID)
            assert json.loads(data) == {"version": "1", "id": cluster_id}
        finally:
            raw.close()
        await c.stop()
        return c.cluster_id

    assert run(again()) == cluster_id
    zookeeper.stop()
    zookeeper.start()
    assert run(again()) == cluster_id


# ------------------------------------------------------------------ brokers

def test_broker_registration_visible_ephemeral_and_unique(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        a, b = coordinator(zookeeper, 1), coordinator(zookeeper, 2)
        await a.start()
        await b.start()
        raw = Raw(zookeeper)
        try:
            await wait_until(lambda: [x.broker_id for x in a.live_brokers()] == [1, 2])
            assert [x.broker_id for x in b.live_brokers()] == [1, 2]
            assert b.live_brokers()[0].port == 9001
            data, stat = await raw("get", "/brokers/ids/1")
            obj = json.loads(data)
            assert obj["version"] == 5 and obj["endpoints"] == ["PLAINTEXT://127.0.0.1:9001"]
            assert obj["host"] == "127.0.0.1" and obj["port"] == 9001
            assert obj["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
            assert stat.ephemeralOwner == a.session_id

            # A second broker with id 1 is refused while the first lives, as Kafka refuses it.
            dup = coordinator(zookeeper, 1)
            with pytest.raises(BrokerIdInUseError, match="registered in ZooKeeper by another live broker"):
                await dup.start()
            assert (await raw("get", "/brokers/ids/1"))[1].ephemeralOwner == a.session_id

            # Closing the session removes the registration at once.
            await a.stop()
            assert await raw("exists", "/brokers/ids/1") is None
            await wait_until(lambda: [x.broker_id for x in b.live_brokers()] == [2],
                             what="broker 1 to leave b's cache")
            # ...and the id can be registered again.
            a2 = coordinator(zookeeper, 1)
            await a2.start()
            await wait_until(lambda: [x.broker_id for x in b.live_brokers()] == [1, 2])
            await a2.stop()
        finally:
            raw.close()
            await b.stop()

    run(main())


# ------------------------------------------------------------------ topics

def test_topic_cache_follows_writes_of_other_clients(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        a, b = coordinator(zookeeper, 1), coordinator(zookeeper, 2)
        await a.start()
        await b.start()
        raw = Raw(zookeeper)
        try:
            meta = await a.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
            assert a.topic("orders") == meta          # the writer's cache has it on return
            await wait_until(lambda: b.topic("orders") == meta, what="orders in b's cache")
            assert b.topic_by_id(meta.topic_id) == meta
            # Kafka's layout: config node first, then the assignment with a topic id.
            cfg, _ = await raw("get", "/config/topics/orders")
            assert json.loads(cfg) == {"version": 1, "config": {"retention.ms": "1000"}}
            asg = json.loads((await raw("get", "/brokers/topics/orders"))[0])
            assert asg["version"] == 3 and asg["partitions"] == {"0": [1, 2], "1": [2, 1]}
            assert zp.parse_kafka_uuid(asg["topic_id"]) == meta.topic_id

            with pytest.raises(TopicAlreadyExistsError):
                await b.create_topic("orders", {0: [2]}, {})

            # Partitions and configs changed through a, seen by b.
            await a.add_partitions("orders", {2: [1, 2]})
            await wait_until(lambda: sorted(b.topic("orders").partitions) == [0, 1, 2])
            with pytest.raises(InvalidPartitionsError):
                await b.add_partitions("orders", {2: [2, 1]})
            await a.set_topic_configs("orders", {"cleanup.policy": "compact"})
            await wait_until(lambda: b.topic("orders").configs == {"cleanup.policy": "compact"})
            changes = await raw("get_children", zp.CONFIG_CHANGES)
            assert len(changes) == 1 and changes[0].startswith("config_change_")
            note = json.loads((await raw("get", f"{zp.CONFIG_CHANGES}/{changes[0]}"))[0])
            assert note == {"version": 2, "entity_path": "topics/orders"}

            # A topic written by another tool in Kafka's format.
            await raw("create", "/config/topics/legacy", b'{"version":1,"config":{}}')
            await raw("create", "/brokers/topics/legacy",
                      b'{"version":3,"partitions":{"0":[2]},"adding_replicas":{},'
                      b'"removing_replicas":{},"topic_id":"ornE6H8ASx6ebQEjRWeJqw"}')
            await wait_until(lambda: a.topic("legacy") is not None and b.topic("legacy") is not None)
            assert b.topic("legacy").partitions == {0: [2]}
            assert zp.kafka_uuid_str(b.topic("legacy").topic_id) == "ornE6H8ASx6ebQEjRWeJqw"
            await raw("set", "/config/topics/legacy", b'{"version":1,"config":{"retention.ms":"5"}}')
            await wait_until(lambda: b.topic("legacy").configs == {"retention.ms": "5"})

            # Deletion: marked by an admin, completed by the controller.
            with pytest.raises(UnknownTopicOrPartitionError):
                await a.delete_topic("nope")
            await a.delete_topic("orders")
            assert await raw("exists", "/admin/delete_topics/orders") is not None
            assert b.topic("orders") is not None          # until the controller completes it
            await wait_until(lambda: b.topics_pending_deletion() == {"orders"})
            assert await b.topics_marked_for_deletion() == {"orders"}
            with pytest.raises(TopicAlreadyExistsError, match="marked for deletion"):
                await b.create_topic("orders", {0: [1]}, {})
            await b.complete_topic_deletion("orders")
            for path in ("/brokers/topics/orders", "/config/topics/orders",
                         "/admin/delete_topics/orders"):
                assert await raw("exists", path) is None, path
            await wait_until(lambda: a.topic("orders") is None and b.topic("orders") is None)

            # Removed behind our back by another tool.
            await raw("delete", "/brokers/topics/legacy", recursive=True)
            await wait_until(lambda: not a.topics() and not b.topics(),
                             what="legacy to leave both caches")
        finally:
            raw.close()
            await a.stop()
            await b.stop()

    run(main())


# ------------------------------------------------------------------ partition state

def test_partition_state_update_is_conditional(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        a, b = coordinator(zookeeper, 1), coordinator(zookeeper, 2)
        await a.start()
        await b.start()
        raw = Raw(zookeeper)
        try:
            await a.create_topic("t", {0: [1, 2]}, {})
            epoch = await a.try_elect_controller()
            assert epoch == 1
            v = await a.create_partition_state(
                "t", 0, zp.PartitionState(1, 0, [1, 2], epoch),
                controller_epoch_zk_version=a.controller_epoch_zk_version)
            assert v == 0
            data, _ = await raw("get", "/brokers/topics/t/partitions/0/state")
            assert json.loads(data) == {"controller_epoch": 1, "leader": 1, "version": 1,
                                        "leader_epoch": 0, "isr": [1, 2]}

            # Both read version 0; the first writer wins, the stale one is refused.
            (s_a, v_a), (s_b, v_b) = await a.get_partition_state("t", 0), await b.get_partition_state("t", 0)
            assert v_a == v_b == 0
            new_v = await a.update_partition_state("t", 0, zp.PartitionState(1, 0, [1], epoch), v_a)
            assert new_v == 1
            with pytest.raises(StaleZkVersionError, match="BADVERSION"):
                await b.update_partition_state("t", 0, zp.PartitionState(2, 1, [2], epoch), v_b)
            assert await b.get_partition_state("t", 0) == (zp.PartitionState(1, 0, [1], epoch), 1)

            results = await b.update_partition_states({("t", 0): (zp.PartitionState(2, 1, [2], 1), 0)})
            assert isinstance(results[("t", 0)], StaleZkVersionError)

            # A deposed controller's write is refused even at the right node version.
            old_zkv = a.controller_epoch_zk_version
            await a.resign_controller()
            assert await b.try_elect_controller() == 2
            with pytest.raises(ControllerMovedError):
                await a.update_partition_state("t", 0, zp.PartitionState(1, 1, [1], 1), 1,
                                               controller_epoch_zk_version=old_zkv)
            assert (await b.get_partition_state("t", 0))[1] == 1
            v2 = await b.update_partition_state(
                "t", 0, zp.PartitionState(2, 1, [2], 2), 1,
                controller_epoch_zk_version=b.controller_epoch_zk_version)
            assert v2 == 2
        finally:
            raw.close()
            await a.stop()
            await b.stop()

    run(main())


def test_a_leaders_isr_write_whose_answer_was_lost_is_taken_as_written(zookeeper: ZooKeeperServer) -> None:
    """A leader's ISR write that landed but whose answer was lost (a dropped connection)
    is refused for its version when retried. The znode is at the leader's own epoch, which
    only that leader writes: what it holds is taken (Kafka's checkLeaderAndIsrZkData).
    At another leader epoch the leader is stale: None."""
    async def main() -> None:
        a = coordinator(zookeeper, 1)
        await a.start()
        try:
            await a.create_topic("t", {0: [1, 2, 3]}, {})
            epoch = await a.try_elect_controller()
            await a.create_partition_state("t", 0, zp.PartitionState(1, 4, [1, 2], epoch),
                                           controller_epoch_zk_version=a.controller_epoch_zk_version)
            wanted = LeaderAndIsr(1, 4, [1, 2, 3], epoch)
            assert await a.update_isr_as_leader("t", 0, wanted, 0) == ([1, 2, 3], 1)
            # The same write again from version 0: it already landed.
            assert await a.update_isr_as_leader("t", 0, wanted, 0) == ([1, 2, 3], 1)
            # Another ISR asked from a stale version, still at our epoch: what is there wins.
            assert await a.update_isr_as_leader("t", 0, LeaderAndIsr(1, 4, [1], epoch), 0) \
                == ([1, 2, 3], 1)
            # The controller elected another leader (epoch 5): this one is stale.
            await a.update_partition_state("t", 0, zp.PartitionState(2, 5, [2, 3], epoch), 1)
            assert await a.update_isr_as_leader("t", 0, LeaderAndIsr(1, 4, [1, 2], epoch), 1) is None
            assert await a.update_isr_as_leader("t", 9, LeaderAndIsr(1, 0, [1], epoch), 0) is None
        finally:
            await a.stop()

    run(main())


# ------------------------------------------------------------------ controller election

def test_exactly_one_controller_and_epochs_increase(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        cs = {b: coordinator(zookeeper, b) for b in range(1, 6)}
        await asyncio.gather(*(c.start() for c in cs.values()))
        raw = Raw(zookeeper)
        epochs: list[int] = []
        try:
            for _ in range(4):
                live = list(cs.values())
                results = await asyncio.gather(*(c.try_elect_controller() for c in live))
                winners = [c for c, r in zip(live, results) if r is not None]
                assert len(winners) == 1, results
                winner = winners[0]
                epoch = next(r for r in results if r is not None)
                epochs.append(epoch)
                data, stat = await raw("get", "/controller")
                ctl = json.loads(data)
                assert ctl["version"] == 2 and ctl["brokerid"] == winner.broker_id
                assert stat.ephemeralOwner == winner.session_id
                assert int((await raw("get", "/controller_epoch"))[0]) == epoch
                assert winner.is_controller and winner.controller_epoch_zk_version is not None
                await wait_until(lambda: all(c.controller_id == winner.broker_id for c in live))
                assert sum(c.is_controller for c in live) == 1
                # Nobody else can take over while it lives.
                assert await live[(live.index(winner) + 1) % len(live)].try_elect_controller() is None
                # The controller's session closes: /controller vanishes with it.
                await winner.stop()
                del cs[winner.broker_id]
                await wait_until(lambda: all(c.controller_id == -1 for c in cs.values()))
            assert epochs == [1, 2, 3, 4]
        finally:
            raw.close()
            await asyncio.gather(*(c.stop() for c in cs.values()))

    run(main())


def test_controller_failover_driven_by_watch_events(zookeeper: ZooKeeperServer) -> None:
    """Brokers that re-run for election when ControllerChanged says there is none: the
    usual controller loop. After the controller dies exactly one successor appears."""
    async def main() -> None:
        cs = [coordinator(zookeeper, b) for b in (1, 2, 3)]
        won: list[tuple[int, int]] = []

        def on_event(c: ZkMetadataStore) -> Callable[[Any], None]:
            async def elect() -> None:
                epoch = await c.try_elect_controller()
                if epoch is not None:
                    won.append((c.broker_id, epoch))

            def handler(ev: Any) -> None:
                if isinstance(ev, ControllerChanged) and ev.controller_id == -1:
                    asyncio.get_running_loop().create_task(elect())
            return handler

        for c in cs:
            c.subscribe(on_event(c))
        await asyncio.gather(*(c.start() for c in cs))
        try:
            await asyncio.gather(*(c.try_elect_controller() for c in cs))
            first = next(c for c in cs if c.is_controller)
            await first.stop()
            await wait_until(lambda: len(won) == 1, what="a successor")
            await asyncio.sleep(0.3)
            assert len(won) == 1 and won[0][1] == 2 and won[0][0] != first.broker_id
            rest = [c for c in cs if c is not first]
            await wait_until(lambda: all(c.controller_id == won[0][0] for c in rest))
        finally:
            await asyncio.gather(*(c.stop() for c in cs))

    run(main())


# ------------------------------------------------------------------ producer ids

def test_producer_id_blocks_never_overlap(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        cs = [coordinator(zookeeper, b) for b in (1, 2, 3, 4)]
        await asyncio.gather(*(c.start() for c in cs))
        raw = Raw(zookeeper)
        rng = random.Random(7)
        try:
            sizes = [[rng.choice([1, 10, 1000]) for _ in range(15)] for _ in cs]

            async def allocate(c: ZkMetadataStore, n: int) -> tuple[int, int]:
                return await c.allocate_producer_ids(n), n

            blocks = sorted(await asyncio.gather(
                *(allocate(c, n) for c, ns in zip(cs, sizes) for n in ns)))
            assert blocks[0][0] == 0
            for (s1, n1), (s2, _) in zip(blocks, blocks[1:]):
                assert s1 + n1 == s2, (s1, n1, s2)        # contiguous, never overlapping
            total = sum(n for _, n in blocks)
            data, _ = await raw("get", zp.LATEST_PRODUCER_ID_BLOCK)
            obj = json.loads(data)
            assert obj["version"] == 1 and obj["block_end"] == str(total - 1)
            assert obj["broker"] in (1, 2, 3, 4)
        finally:
            raw.close()
            await asyncio.gather(*(c.stop() for c in cs))

    run(main())


# ------------------------------------------------------------------ chroot

def test_chroot_is_created_and_isolates(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        raw = Raw(zookeeper, chroot="")
        try:
            assert await raw("exists", "/strom") is None
            a = coordinator(zookeeper, 1, chroot="/strom")
            b = coordinator(zookeeper, 1, chroot="/other/nested")     # same id, other cluster
            await a.start()
            await b.start()
            assert await raw("exists", "/strom/brokers/ids/1") is not None
            assert await raw("exists", "/other/nested/brokers/ids/1") is not None
            assert await raw("exists", "/brokers") is None
            assert a.cluster_id != b.cluster_id
            await a.create_topic("only-in-strom", {0: [1]}, {})
            assert await raw("exists", "/strom/brokers/topics/only-in-strom") is not None
            await asyncio.sleep(0.1)
            assert b.topic("only-in-strom") is None
            await a.stop()
            await b.stop()
        finally:
            raw.close()

    run(main())


# ------------------------------------------------------------------ event order

def test_watch_events_arrive_in_order_on_the_loop(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        b = coordinator(zookeeper, 2)
        events: list[Any] = []
        threads: set[int] = set()

        def on_event(ev: Any) -> None:
            threads.add(threading.get_ident())
            events.append(ev)

        b.subscribe(on_event)
        await b.start()
        raw = Raw(zookeeper)
        try:
            names = [f"t{i:02d}" for i in range(20)]
            for n in names:                     # written one after another, no waiting
                await raw("create", f"/brokers/topics/{n}",
                          zp.encode_topic(zp.TopicAssignment({0: [2]}, zp.new_kafka_uuid())))
            await raw("create", "/config/topics/t00", zp.encode_entity_config({"v": "0"}))
            for i in range(1, 10):
                await raw("set", "/config/topics/t00", zp.encode_entity_config({"v": str(i)}))
            await raw("create", "/brokers/ids/7",
                      zp.encode_broker(zp.BrokerRegistration(7, [zp.EndPoint("PLAINTEXT", "h", 1)])),
                      ephemeral=True)
            await wait_until(lambda: len(b.topics()) == 20 and
                             b.topic("t00").configs == {"v": "9"} and
                             [x.broker_id for x in b.live_brokers()] == [2, 7])
            assert threads == {threading.get_ident()}       # delivered on the loop thread

            # Watches coalesce bursts, but what arrives is in write order.
            batches = [ev.added for ev in events if isinstance(ev, TopicsChanged)]
            order = [names.index(n) for batch in batches for n in sorted(batch)]
            assert order == list(range(20))
            for earlier, later in zip(batches, batches[1:]):
                assert max(earlier) < min(later)
            values = [int(ev.configs["v"]) for ev in events if isinstance(ev, TopicConfigChanged)]
            assert values == sorted(values) and values[-1] == 9
            assert any(isinstance(ev, BrokersChanged) and ev.added == {7} for ev in events)

            # ISR change notifications: the controller side reads then deletes them.
            a = coordinator(zookeeper, 1)
            await a.start()
            node = await a.notify_isr_change([("t01", 0), ("t02", 0)])
            assert node.startswith("isr_change_")
            await wait_until(lambda: any(isinstance(ev, IsrChangesNotified) for ev in events))
            pending = await b.isr_change_notifications()
            assert pending == {node: {("t01", 0), ("t02", 0)}}
            await b.delete_isr_change_notifications(pending)
            assert await raw("get_children", zp.ISR_CHANGE_NOTIFICATION) == []
            await a.delete_topic("t03")
            await wait_until(lambda: any(isinstance(ev, TopicDeletionsRequested)
                                         and ev.topics == {"t03"} for ev in events))
            await a.stop()
        finally:
            raw.close()
            await b.stop()

    run(main())


# ------------------------------------------------------------------ session loss

def _expire_session(zk: ZooKeeperServer, c: ZkMetadataStore) -> None:
    """The classic trick: a second client attaches to the same session, then closes it."""
    session_id, password = c.client.client_id
    other = KazooClient(hosts=zk.connect_string_for(CHROOT), client_id=(session_id, password))
    other.start(10)
    other.stop()
    other.close()


def test_session_expiry_reregisters_broker(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        a, b = coordinator(zookeeper, 1), coordinator(zookeeper, 2)
        events: list[Any] = []
        a.subscribe(events.append)
        await a.start()
        await b.start()
        raw = Raw(zookeeper)
        try:
            assert await a.try_elect_controller() == 1
            old_session = a.session_id
            await asyncio.to_thread(_expire_session, zookeeper, a)
            await wait_until(lambda: any(isinstance(ev, SessionReestablished) for ev in events),
                             timeout=20, what="a new session")
            ev = next(ev for ev in events if isinstance(ev, SessionReestablished))
            assert ev.registered and ev.error is None and ev.session_id != old_session
            _, stat = await raw("get", "/brokers/ids/1")
            assert stat.ephemeralOwner == a.session_id != old_session
            # /controller died with the old session; a is no longer controller.
            assert not a.is_controller
            await wait_until(lambda: a.controller_id == -1 and b.controller_id == -1)
            assert await b.try_elect_controller() == 2
            await wait_until(lambda: a.controller_id == 2)
            # The caches watch again after the resync.
            await b.create_topic("after", {0: [1]}, {})
            await wait_until(lambda: a.topic("after") is not None)
            assert [x.broker_id for x in b.live_brokers()] == [1, 2]
        finally:
            raw.close()
            await a.stop()
            await b.stop()

    run(main())


def test_survives_zookeeper_restart(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        # A reconnect attempt that lands while the server is still starting can wait a whole
        # session timeout for the handshake (kazoo's socket timeout): allow for two.
        kw = dict(session_timeout_ms=10000, connection_timeout_ms=30000)
        a, b = coordinator(zookeeper, 1, **kw), coordinator(zookeeper, 2, **kw)
        await a.start()
        await b.start()
        try:
            await asyncio.to_thread(zookeeper.stop)
            await asyncio.sleep(0.5)
            await asyncio.to_thread(zookeeper.start)
            # Usually the same session resumes (an overloaded machine may expire it; then the
            # broker re-registers). Either way the watches are re-armed by the resync.
            await a.create_topic("post-restart", {0: [1, 2]}, {})
            await wait_until(lambda: b.topic("post-restart") is not None, timeout=20)
            await wait_until(lambda: [x.broker_id for x in a.live_brokers()] == [1, 2], timeout=20)
        finally:
            await a.stop()
            await b.stop()

    run(main())
