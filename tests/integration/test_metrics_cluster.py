"""Cluster metrics in a real 3-broker cluster (ZooKeeper, the controller): a paused follower
raises under-replicated partitions and ISR shrinks on the leader and, resumed, counts an
expand; killing a broker makes offline only the partitions with no live replica; exactly
one broker reports itself as the active controller, across a controller kill too."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.metrics.render import sample_value
from tests.support.broker_process import free_port
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LAG_MS = 2000


def metrics(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics.json", timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def cluster(tmp_path):
    ports = [free_port() for _ in range(3)]
    c = Cluster(tmp_path / "c", brokers=3, replica_lag_time_max_ms=LAG_MS,
                broker_overrides={i: {"metrics.port": str(ports[i])} for i in range(3)})
    c.metrics_ports = ports
    with c:
        # The metrics endpoint starts just after the Kafka listener the cluster waits for.
        c.wait_until(lambda: all(_answers(port) for port in ports), timeout=10)
        yield c


def _answers(port: int) -> bool:
    try:
        metrics(port)
        return True
    except OSError:
        return False


def value(c: Cluster, i: int, family: str, labels: dict | None = None) -> float:
    return sample_value(metrics(c.metrics_ports[i]), family, labels)


def active_controllers(c: Cluster, live: list[int]) -> dict[int, float]:
    return {i: value(c, i, "kafka_controller_kafkacontroller_activecontrollercount") for i in live}


def test_urp_isr_changes_offline_partitions_and_one_active_controller(cluster):
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    controller = c.controller_id()
    assert controller is not None
    assert active_controllers(c, [0, 1, 2]) == {i: float(i == controller) for i in range(3)}

    # ---- a paused follower: URP and an ISR shrink on the leader, then an expand ------------
    # Led by a broker that is not the controller, followed by the third one, which we pause.
    others = [i for i in range(3) if i != controller]
    leader, follower = others[0], others[1]
    admin.create_topics([NewTopic("urp", num_partitions=1, replica_assignment=[[leader, follower, controller]])])["urp"].result(30)
    c.wait_for_leader("urp", 0)
    c.wait_until(lambda: sorted(c.isr("urp", 0)) == [0, 1, 2])
    # The first ISR is the controller's, not earned: a replica slow to send its first fetch
    # (a loaded machine) is shrunk and expanded once, the broker doing its job. One record
    # acknowledged by all three proves both followers fetch before we pause one.
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "log_level": 0})
    producer.produce("urp", b"every replica has me", partition=0)
    assert producer.flush(30) == 0
    shrinks0 = value(c, leader, "kafka_server_replicamanager_isrshrinks")
    expands0 = value(c, leader, "kafka_server_replicamanager_isrexpands")
    assert value(c, leader, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    c.sigstop(follower)
    paused = time.monotonic()
    try:
        # The URP gauge and the ISR in ZooKeeper of the shrink that drops the paused follower.
        c.wait_until(lambda: value(c, leader, "kafka_server_replicamanager_underreplicatedpartitions") > 0
                     and sorted(c.isr("urp", 0)) == sorted({leader, controller}),
                     timeout=LAG_MS / 1000 * 3)
        took = time.monotonic() - paused
        urp = value(c, leader, "kafka_server_replicamanager_underreplicatedpartitions")
        shrinks = value(c, leader, "kafka_server_replicamanager_isrshrinks")
        print(f"\nfollower {follower} paused: leader {leader} reports URP {urp:.0f} after {took:.1f} s "
              f"(replica.lag.time.max.ms {LAG_MS}), isr shrinks {shrinks0:.0f} -> {shrinks:.0f}")
        assert took >= LAG_MS / 1000 * 0.9
        # Exactly one: the healthy follower never left the ISR.
        assert shrinks == shrinks0 + 1
    finally:
        c.sigcont(follower)
    c.wait_until(lambda: value(c, leader, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
                 timeout=20)
    expands = value(c, leader, "kafka_server_replicamanager_isrexpands")
    print(f"follower resumed: URP back to 0, isr expands {expands0:.0f} -> {expands:.0f}")
    assert expands == expands0 + 1 and sorted(c.isr("urp", 0)) == [0, 1, 2]
    assert sum(value(c, i, "kafka_server_replicamanager_underreplicatedpartitions") for i in range(3)) == 0

    # ---- killing the controller: offline only where no replica lives; one controller -------
    victim = controller
    admin.create_topics([NewTopic("solo", num_partitions=1, replica_assignment=[[victim]]),
                         NewTopic("triple", num_partitions=2, replication_factor=3)])["solo"].result(30)
    c.wait_for_leader("solo", 0)
    for p in range(2):
        c.wait_for_leader("triple", p)
    assert value(c, victim, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    c.kill9(victim)
    survivors = [i for i in range(3) if i != victim]
    samples = []
    deadline = time.monotonic() + 40
    new_controller = None
    while time.monotonic() < deadline:
        active = active_controllers(c, survivors)
        samples.append(active)
        assert sum(active.values()) <= 1, f"two active controllers: {active}"
        ones = [i for i, v in active.items() if v == 1]
        if ones and value(c, ones[0], "kafka_controller_kafkacontroller_offlinepartitionscount") == 1:
            new_controller = ones[0]
            break
        time.sleep(0.1)
    assert new_controller is not None, f"no controller reported the offline partition: {samples[-3:]}"
    without = sum(1 for s in samples if sum(s.values()) == 0)
    print(f"controller {victim} killed: {len(samples)} samples of the survivors, {without} with no active "
          f"controller yet (ZooKeeper session expiry), none with two; broker {new_controller} took over")
    # Only "solo" is offline: every partition of "triple" (and "urp") has a live replica.
    for _ in range(10):
        active = active_controllers(c, survivors)
        assert active == {i: float(i == new_controller) for i in survivors}
        assert value(c, new_controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 1
        other = next(i for i in survivors if i != new_controller)
        assert value(c, other, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        time.sleep(0.1)
    assert c.leader("triple", 0) in survivors and c.leader("triple", 1) in survivors
    doc = metrics(c.metrics_ports[new_controller])
    assert sample_value(doc, "kafka_controller_controllerstats_leaderelectionrateandtimems",
                        sample="kafka_controller_controllerstats_leaderelectionrateandtimems_count") >= 1
    assert sample_value(doc, "kafka_controller_controllerstats_uncleanleaderelections") == 0
