"""Several listeners per broker, as Kafka's users run them: brokers replicate on an internal
listener (inter.broker.listener.name) while clients come in on another, and each client is
given the addresses of the listener it came in on."""
from __future__ import annotations

import pytest

from clients import AdminClient, Consumer, Producer
from clients.admin import NewTopic
from tests.support.broker_process import free_port
from tests.support.cluster import Cluster
from tests.support.security import plain_jaas
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


def test_clients_get_their_listeners_addresses_and_brokers_replicate_on_theirs(tmp_path):
    external = {i: free_port() for i in range(2)}
    per_broker = {i: {"listeners": f"INTERNAL://127.0.0.1:{{port}},EXTERNAL://127.0.0.1:{external[i]}"}
                  for i in range(2)}
    common = {"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
              "inter.broker.listener.name": "INTERNAL",
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.external.plain.sasl.jaas.config": plain_jaas()}
    with Cluster(tmp_path, brokers=2, overrides=common, broker_overrides=per_broker) as c:
        internal = {i: c.broker(i).port for i in range(2)}
        with WireClient("127.0.0.1", internal[0]) as w:
            md = w.request("Metadata", 9, {"topics": [], "allow_auto_topic_creation": False})
        assert sorted(b.port for b in md.brokers) == sorted(internal.values())

        conf = {"bootstrap.servers": f"127.0.0.1:{external[1]}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
        with AdminClient(conf) as admin:
            admin.create_topics([NewTopic("t", 2, 2)])
            nodes = admin.describe_cluster().brokers
        assert sorted(n.port for n in nodes) == sorted(external.values())
        with Producer(config={**conf, "acks": "all"}) as p:
            for i in range(20):
                p.send("t", str(i).encode(), partition=i % 2)
            p.flush(30)
        with Consumer(config={**conf, "group.id": "g", "auto.offset.reset": "earliest"}) as consumer:
            consumer.subscribe(["t"])
            got: list[bytes] = []
            for _ in range(30):
                got += [r.value for r in consumer.poll(1.0)]
                if len(got) == 20:
                    break
        assert sorted(got) == sorted(str(i).encode() for i in range(20))
        for p in range(2):      # replicated over INTERNAL: both replicas in sync
            c.wait_until(lambda: c.isr("t", p) if len(c.isr("t", p)) == 2 else None, 30,
                         message=f"t-{p} fully in sync")
