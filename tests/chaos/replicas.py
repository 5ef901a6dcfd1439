"""Helpers the fault tests share: a replicated topic, and comparing replicas' log bytes."""
from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(cluster, topic: str) -> None:
    """One partition, replication factor 3, min.insync.replicas 2, all replicas in sync."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for_leader(topic, 0)
    cluster.wait_until(lambda: sorted(cluster.isr(topic, 0)) == [0, 1, 2], timeout=30,
                       message="full ISR after topic creation")


def log_bytes(cluster, i: int, topic: str, partition: int = 0) -> bytes:
    """Broker i's log of the partition: its segment files concatenated."""
    d = cluster.broker(i).log_dir / f"{topic}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def replicas_identical(cluster, topic: str) -> bool:
    logs = [log_bytes(cluster, i, topic) for i in range(3)]
    return logs[0] == logs[1] == logs[2] and len(logs[0]) > 0
