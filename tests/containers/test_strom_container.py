"""`StromContainer`, as a user's test writes it: a broker in a container, reached by
confluent-kafka on the port Docker mapped, and by another container on their network."""
from __future__ import annotations

import subprocess

import pytest
from testcontainers.core.network import Network

from broker.testing.container_support import owner_labels
from broker.testing.containers import StromContainer

pytestmark = pytest.mark.integration


def round_trip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        while len(got) < len(values):
            msgs = c.consume(len(values), timeout=20)
            assert msgs, f"read {len(got)} of {len(values)} records, then nothing for 20 s"
            for m in msgs:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    return got


def test_with_strom_container_confluent_kafka_round_trip(strom_image):
    values = [f"record-{i}".encode() for i in range(500)]
    with StromContainer(strom_image) as strom:
        bootstrap = strom.get_bootstrap_server()
        print(f"StromContainer ready on {bootstrap} in {strom.start_seconds:.2f} s")
        assert round_trip(bootstrap, "round-trip", values) == values


def test_broker_config_and_the_listener_for_other_containers(strom_image):
    """with_broker_config reaches server.properties (auto-created topics get 3 partitions);
    a second container on the same network reads with strom's console consumer through the
    BROKER listener."""
    from confluent_kafka.admin import AdminClient
    with Network(docker_network_kw={"labels": owner_labels()}) as net, \
            StromContainer(strom_image).with_broker_config("num.partitions", 3) \
            .with_network(net) as strom:
        values = [b"a", b"b", b"c"]
        assert sorted(round_trip(strom.get_bootstrap_server(), "shared", values)) == values
        topics = AdminClient({"bootstrap.servers": strom.get_bootstrap_server()}) \
            .list_topics(timeout=10).topics
        assert len(topics["shared"].partitions) == 3
        out = subprocess.run(
            ["docker", "run", "--rm", "--network", net.name, strom_image, "kafka-console-consumer",
             "--bootstrap-server", strom.get_internal_bootstrap_server(), "--topic", "shared",
             "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000"],
            capture_output=True, text=True, timeout=60)
        assert sorted(out.stdout.split()) == ["a", "b", "c"], out.stdout + out.stderr
