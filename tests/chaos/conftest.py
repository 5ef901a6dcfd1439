import pytest

from tests.support.cluster import Cluster


@pytest.fixture
def cluster(tmp_path):
    """ZooKeeper + 3 broker processes (replication factor 3, min.insync.replicas 2)."""
    c = Cluster(tmp_path / "cluster", brokers=3)
    c.start()
    try:
        yield c
    finally:
        c.stop()
