"""unclean.leader.election.enable: when every in-sync replica is gone, a partition stays
offline (leader -1) unless unclean election is enabled, in which case an out-of-sync
replica is elected (and acknowledged records may be lost, which is why it is off)."""
from __future__ import annotations

import pytest

from tests.chaos.conftest import ZK_SESSION_MS
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "unclean"


def isolate_leader(cluster, topic_configs: dict[str, str] | None = None) -> tuple[int, int]:
    """Leave the partition's leader as the only in-sync replica, then kill it too and
    restart one follower: (dead leader, restarted out-of-sync follower)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[0, 1, 2]],
                                  config=topic_configs or {})])[TOPIC].result(30)
    cluster.wait_until(lambda: sorted(cluster.isr(TOPIC, 0)) == [0, 1, 2], timeout=30)
    cluster.kill9(1)
    cluster.kill9(2)
    cluster.wait_until(lambda: cluster.isr(TOPIC, 0) == [0], timeout=30)
    cluster.kill9(0)
    for b in (0, 1, 2):                 # their ZooKeeper sessions must expire first
        cluster.wait_for_broker_gone(b)
    cluster.restart(1)
    return 0, 1


def test_partition_stays_offline_without_unclean_election(tmp_path):
    with Cluster(tmp_path / "c", brokers=3, zookeeper_session_timeout_ms=ZK_SESSION_MS) as cluster:
        cluster.start()
        dead, follower = isolate_leader(cluster)
        cluster.wait_until(lambda: cluster.partition_state(TOPIC, 0)["leader"] == -1, timeout=30)
        state = cluster.partition_state(TOPIC, 0)
        print(f"all in-sync replicas gone: state {state}")
        assert state["isr"] == [dead]                       # who may be elected cleanly later
        cluster.restart(dead)
        cluster.wait_until(lambda: cluster.leader(TOPIC, 0) == dead, timeout=30)


@pytest.mark.parametrize("where", ["broker", "topic"])
def test_unclean_election_elects_an_out_of_sync_replica(tmp_path, where):
    setting = {"unclean.leader.election.enable": "true"}
    with Cluster(tmp_path / "c", brokers=3, overrides=setting if where == "broker" else None,
                 zookeeper_session_timeout_ms=ZK_SESSION_MS) as cluster:
        cluster.start()
        dead, follower = isolate_leader(cluster, setting if where == "topic" else None)
        cluster.wait_until(lambda: cluster.leader(TOPIC, 0) == follower, timeout=30)
        print(f"unclean election: state {cluster.partition_state(TOPIC, 0)}")
        assert cluster.isr(TOPIC, 0) == [follower]


@pytest.mark.parametrize("where", ["broker", "topic"])
def test_turning_unclean_election_on_elects_an_offline_partition(tmp_path, where):
    """Kafka's enableDefault/TopicUncleanLeaderElection: an offline partition gets an
    out-of-sync leader as soon as unclean election is turned on, for the cluster
    (kafka-configs --entity-default) or for the topic, without a broker change."""
    import subprocess
    from pathlib import Path
    with Cluster(tmp_path / "c", brokers=3, zookeeper_session_timeout_ms=ZK_SESSION_MS) as cluster:
        cluster.start()
        dead, follower = isolate_leader(cluster)
        cluster.wait_until(lambda: cluster.partition_state(TOPIC, 0)["leader"] == -1, timeout=30)
        entity = (["--entity-type", "brokers", "--entity-default"] if where == "broker"
                  else ["--entity-type", "topics", "--entity-name", TOPIC])
        tool = Path(__file__).resolve().parents[2] / "bin" / "kafka-configs.sh"
        done = subprocess.run([str(tool), "--bootstrap-server", cluster.broker(follower).bootstrap,
                               *entity, "--alter", "--add-config",
                               "unclean.leader.election.enable=true"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        cluster.wait_until(lambda: cluster.leader(TOPIC, 0) == follower, timeout=30)
        assert cluster.isr(TOPIC, 0) == [follower]
