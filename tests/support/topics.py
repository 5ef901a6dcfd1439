"""Creating a topic for a test and waiting until every partition has a leader."""
from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

QUIET = {"log_level": 0}


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {topic} not ready"
        time.sleep(0.1)
