import pytest

# bin/run-tests.sh runs the suite in two parts: the tests not marked `alone` on every core
# (pytest-xdist, --dist loadgroup), then the `alone` ones by themselves. A test is `alone`
# when it bounds a time or a rate that a busy neighbour could stretch; the fault tests are,
# as a whole: their waits and failover bounds are the point of them.
ALONE_DIRS = ("tests/chaos/",)

# Tests that share something a second worker must not touch at the same time run in one
# worker (xdist_group), one after the other; the other worker goes on with the rest.
SHARED_RESOURCE_GROUPS = {
    # bin/start-cluster.sh's fixed ports: ZooKeeper 2181, brokers 9092-9094, metrics, REST 8082
    "tests/integration/test_start_cluster_script.py": "start-cluster-ports",
    "tests/integration/test_start_cluster_secure.py": "start-cluster-ports",
    "tests/integration/test_strom_verify.py": "start-cluster-ports",
    # Docker networks: each picks a subnet Docker calls free, which two at once could share
    "tests/containers/": "containers",
    # one Spark JVM per worker is plenty on two cores, and the session fixture is reused
    "tests/spark/": "spark",
}


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run fault-injection tests with their full number of rounds")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        rel = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if rel.startswith(ALONE_DIRS):
            item.add_marker(pytest.mark.alone)
        for prefix, group in SHARED_RESOURCE_GROUPS.items():
            if rel.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def long_run(request) -> bool:
    import os
    return request.config.getoption("--long") or os.environ.get("STROM_LONG_TESTS") == "1"
