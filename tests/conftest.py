import pytest

# bin/run-tests.sh runs the suite in two parts: the tests not marked `alone` on every core
# (pytest-xdist, --dist loadgroup), then the `alone` ones by themselves. A test is `alone`
# when it bounds a time or a rate that a busy neighbour could stretch; the fault tests are,
# as a whole: their waits and failover bounds are the point of them.
ALONE_DIRS = ("tests/chaos/",)

# Tests that share something a second worker must not touch at the same time run in one
# worker, one after the other (`GroupScheduling` below); the other worker goes on with the
# rest.
SHARED_RESOURCE_GROUPS = {
    # bin/start-cluster.sh's fixed ports: ZooKeeper 2181, brokers 9092-9094, metrics, REST 8082
    "tests/integration/test_start_cluster_script.py": "start-cluster-ports",
    "tests/integration/test_start_cluster_secure.py": "start-cluster-ports",
    "tests/integration/test_strom_verify.py": "start-cluster-ports",
    # Docker networks: each picks a subnet Docker calls free, which two at once could share
    "tests/containers/": "containers",
}


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run fault-injection tests with their full number of rounds")


def pytest_itemcollected(item):
    rel = _relative(item)
    if rel.startswith(ALONE_DIRS):
        item.add_marker(pytest.mark.alone)


def _relative(item) -> str:
    root = item.config.rootpath
    return item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With --dist loadgroup: SHARED_RESOURCE_GROUPS' tests each as one unit of work, every
    other test a unit of its own. (pytest-xdist's own loadgroup renames a test's node id
    with its xdist_group, which pytest 9.2's read-only node ids ignore.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for prefix, group in SHARED_RESOURCE_GROUPS.items():
                if nodeid.startswith(prefix):
                    return group
            return nodeid

    return GroupScheduling(config, log)


@pytest.fixture
def long_run(request) -> bool:
    import os
    return request.config.getoption("--long") or os.environ.get("STROM_LONG_TESTS") == "1"
