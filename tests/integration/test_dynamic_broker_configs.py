"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on BROKER resources) against
real broker processes: `kafka-configs --entity-type brokers --entity-default` and
`--entity-name <id>` change the topic defaults of running brokers, every log without its
own value obeys at once, DescribeConfigs reports Kafka's sources, the values survive a
restart, and in a cluster they are stored where Kafka keeps them (/config/brokers/...) and
reach every broker."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic)

from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
FAST_RETENTION = {"log.retention.check.interval.ms": "300", "log.segment.delete.delay.ms": "100"}


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=60)


def produce_old(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    """n records an hour old, spread over the partitions."""
    old = int(time.time() * 1000) - 3_600_000
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions, timestamp=old + i)
    assert p.flush(30) == 0


def segment_bases(log_dir: Path, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(f.stem) for f in (log_dir / f"{topic}-{partition}").glob("*.log"))


def wait_until(cond, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def describe(admin: AdminClient, rtype, name: str) -> dict[str, tuple[str, str]]:
    """name -> (value, source name) as DescribeConfigs answers."""
    res = ConfigResource(rtype, name)
    return {k: (v.value, ConfigSource(v.source).name)
            for k, v in admin.describe_configs([res])[res].result(30).items()}


def test_cluster_wide_and_per_broker_configs_on_a_running_broker(broker_factory):
    b = broker_factory(FAST_RETENTION)
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic("dyn", 1, 1),
                                  NewTopic("own", 1, 1, config={"retention.ms": "86400000"})]).values():
        f.result(30)
    produce_old(b.bootstrap, "dyn", 1, 100)
    produce_old(b.bootstrap, "own", 1, 100)
    time.sleep(1.0)
    assert segment_bases(b.log_dir, "dyn") == [0]           # 7 days by default: kept

    done = kafka_configs(b.bootstrap, "--entity-type", "brokers", "--entity-default", "--alter",
                         "--add-config", "log.retention.ms=1000")
    assert done.returncode == 0, done.stderr
    assert "Completed updating default config for brokers in the cluster." in done.stdout
    # The topic without its own retention.ms takes the new default at once; the other not.
    wait_until(lambda: segment_bases(b.log_dir, "dyn") == [100], what="retention of dyn")
    assert segment_bases(b.log_dir, "own") == [0]
    value, source = describe(admin, ConfigResource.Type.TOPIC, "dyn")["retention.ms"]
    assert (value, source) == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    listed = kafka_configs(b.bootstrap, "--entity-type", "brokers", "--entity-default", "--describe")
    assert "log.retention.ms=1000" in listed.stdout and "DYNAMIC_DEFAULT_BROKER_CONFIG" in listed.stdout

    # This broker's own value wins over the cluster-wide one.
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    value, source = describe(admin, ConfigResource.Type.BROKER, "0")["log.retention.ms"]
    assert (value, source) == ("7200000", "DYNAMIC_BROKER_CONFIG")

    # What strom cannot change while running is refused, with Kafka's error code.
    bad = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("broker.id", "5", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert e.value.args[0].name() == "INVALID_REQUEST"
    assert "Cannot update these configs dynamically" in e.value.args[0].str()
    refused = kafka_configs(b.bootstrap, "--entity-type", "brokers", "--entity-default", "--alter",
                            "--add-config", "max.connections=4")
    assert refused.returncode == 1 and "does not apply max.connections" in refused.stderr
    # Valid for the key, not as topic defaults: an empty cleanup.policy is refused before
    # it is stored (else no log could be created, nor the broker restarted).
    empty = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([empty])[empty].result(30)
    assert e.value.args[0].name() == "INVALID_REQUEST" and "cleanup.policy" in e.value.args[0].str()

    # Both survive a restart.
    b.stop()
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
    value, source = describe(admin, ConfigResource.Type.BROKER, "0")["log.retention.ms"]
    assert (value, source) == ("7200000", "DYNAMIC_BROKER_CONFIG")
    listed = kafka_configs(b.bootstrap, "--entity-type", "brokers", "--entity-default", "--describe")
    assert "log.retention.ms=1000" in listed.stdout
    gone = kafka_configs(b.bootstrap, "--entity-type", "brokers", "--entity-name", "0", "--alter",
                         "--delete-config", "log.retention.ms")
    assert gone.returncode == 0, gone.stderr
    value, source = describe(admin, ConfigResource.Type.BROKER, "0")["log.retention.ms"]
    assert (value, source) == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    admin.create_topics([NewTopic("after", 1, 1)])["after"].result(30)   # logs still open
    produce_old(b.bootstrap, "after", 1, 10)


@pytest.mark.slow
def test_a_cluster_wide_config_reaches_every_broker(tmp_path):
    with Cluster(tmp_path / "c", brokers=3, overrides=FAST_RETENTION) as c:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("dynx", 3, 3)])["dynx"].result(30)
        for p in range(3):
            c.wait_for_leader("dynx", p)
        produce_old(c.bootstrap, "dynx", 3, 300)
        c.wait_until(lambda: all(len(c.isr("dynx", p)) == 3 for p in range(3)), message="full ISRs")

        done = kafka_configs(c.broker(1).bootstrap, "--entity-type", "brokers", "--entity-default",
                             "--alter", "--add-config", "log.retention.ms=1000")
        assert done.returncode == 0, done.stderr
        # Stored as Kafka stores it, with its change notification.
        data, _ = c.zk.get(c.path("/config/brokers/<default>"))
        assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "1000"}}
        notes = [json.loads(c.zk.get(c.path(f"/config/changes/{n}"))[0])
                 for n in c.zk.get_children(c.path("/config/changes"))]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notes
        # Every broker, every replica: expired, rolled and deleted.
        c.wait_until(lambda: all(segment_bases(c.broker(i).log_dir, "dynx", p) == [100]
                                 for i in range(3) for p in range(3)),
                     timeout=30, message="retention on every replica")
        for i in range(3):
            one = AdminClient({"bootstrap.servers": c.broker(i).bootstrap, "log_level": 0})
            value, source = describe(one, ConfigResource.Type.BROKER, str(i))["log.retention.ms"]
            assert (value, source) == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
