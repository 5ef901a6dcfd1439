"""The shared ZooKeeper's lease (tests/support/zk_process.py): a cluster on the run's shared
server may not fault it, since every other test's cluster stands on it."""
import pytest

from tests.support.zk_process import ZooKeeperLease


@pytest.mark.parametrize("fault", ["restart", "sigstop", "sigcont", "kill9"])
def test_a_fault_of_the_shared_server_is_refused_with_the_way_out(fault):
    with pytest.raises(RuntimeError, match="own_zookeeper=True"):
        getattr(ZooKeeperLease(), fault)()


def test_stopping_a_lease_leaves_the_server_alone():
    lease = ZooKeeperLease()
    assert lease.stop() is None
    assert lease._server is None        # nothing was started to be stopped
