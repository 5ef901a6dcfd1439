"""A broker elected controller names itself in its Metadata answers from the moment it wins,
not its dead predecessor until its own first UpdateMetadata reaches it.

Seen with librdkafka's AdminClient started right after a controller's kill -9: the new
controller's first Metadata answer named the dead one (its UpdateMetadata to itself was
80 ms behind the election under load), the client waited for that broker and timed out its
CreateTopics after 15 s (test_controller_startup.py, 1 run in 25 under two CPU hogs).

The client here asks the new controller as soon as its log says it won: kill -9 of the
controller, the other brokers' logs read every millisecond, a Metadata request at once.
"""
from __future__ import annotations

import time

import pytest

from tests.support.cluster import Cluster
from tests.support.wire import WireClient
from tests.support.zk_process import zookeeper_available

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180),
              pytest.mark.skipif(not zookeeper_available(), reason="ZooKeeper not installed")]

ROUNDS = 3


def _elected(cluster: Cluster, brokers: list[int], since: dict[int, int]) -> int | None:
    """The broker whose log, after `since`, says it won an election."""
    for b in brokers:
        with open(cluster.broker(b).log_path, "rb") as f:
            f.seek(since[b])
            if f"controller {b}: elected at epoch".encode() in f.read():
                return b
    return None


def test_the_new_controller_names_itself_in_its_first_metadata_answers(tmp_path):
    cluster = Cluster(tmp_path / "cluster", brokers=3).start()
    try:
        with WireClient("127.0.0.1", cluster.broker(0).port) as w:
            r = w.request("CreateTopics", 4, {
                "topics": [{"name": "named", "num_partitions": 12, "replication_factor": 3,
                            "assignments": [], "configs": []}],
                "timeout_ms": 30000, "validate_only": False})
            assert r.topics[0].error_code == 0
        answers: list[tuple[int, list[int]]] = []
        for _ in range(ROUNDS):
            old = cluster.wait_for_controller(timeout=30)
            others = [b for b in range(cluster.size) if b != old]
            clients = {b: WireClient("127.0.0.1", cluster.broker(b).port) for b in others}
            since = {b: cluster.broker(b).log_path.stat().st_size for b in others}
            cluster.kill9(old)
            deadline = time.monotonic() + 30
            while (ctl := _elected(cluster, others, since)) is None:
                assert time.monotonic() < deadline, "no new controller"
                time.sleep(0.001)
            # It logs its win and names itself without yielding to its loop in between, so
            # these requests are answered after that.
            said = [clients[ctl].request("Metadata", 12, {"topics": None}).controller_id
                    for _ in range(5)]
            answers.append((ctl, said))
            for c in clients.values():
                c.close()
            cluster.wait_for_broker_gone(old, timeout=30)
            cluster.restart(old)
            cluster.wait_for_brokers(3, timeout=30)
        wrong = [(ctl, said) for ctl, said in answers if any(s != ctl for s in said)]
        assert not wrong, f"a new controller named another broker (controller, answers): {wrong}"
    finally:
        cluster.stop()
