import re

import pytest

from tests.support.cluster import Cluster

# A chaos failure seen once in CI is gone with its temporary directory: on failure, the
# brokers' warnings and errors, and their replication story (leadership, ISR, truncation),
# go into the report (pytest shows teardown output then).
_NOTABLE = re.compile(r"^\[[^\]]*\] (WARNING |ERROR |CRITICAL |INFO broker\.replication\.|INFO strom\.broker: .*ISR)")
_MAX_LINES_PER_BROKER = 60

# zookeeper.session.timeout.ms of the chaos clusters. Most of a kill -9 round is the wait for
# the dead broker's session to expire (no new leader, controller or re-registration before
# that): 3 s rather than the Cluster default of 6 s. The test ZooKeeper ticks every 500 ms,
# so it grants any timeout in [1 s, 10 s] and expires a session 0-0.5 s late; kazoo pings
# every ~0.6-1 s with a 3 s session, so a broker frozen (SIGSTOP) for less than ~2 s keeps its
# session. A test whose pause must stay inside the session but cannot be that short (e.g. a
# follower frozen past replica.lag.time.max.ms, 3 s) asks for its own timeout with
# @pytest.mark.zk_session_ms(ms).
ZK_SESSION_MS = 3000
ZK_SESSION_S = ZK_SESSION_MS / 1000


def pytest_configure(config):
    config.addinivalue_line("markers", "broker_configs(dict): extra server.properties lines of a "
                                       "test's own cluster fixture")
    config.addinivalue_line("markers", "zk_session_ms(ms): zookeeper.session.timeout.ms of the chaos "
                                       "`cluster` fixture for this test (default ZK_SESSION_MS)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.chaos_call_failed = report.failed


def notable_lines(log_text: str, limit: int = _MAX_LINES_PER_BROKER) -> list[str]:
    """The last `limit` notable lines of a broker log (of a traceback, its first line)."""
    return [line for line in log_text.splitlines() if _NOTABLE.match(line)][-limit:]


def stop_telling_a_failure(c: Cluster, request) -> None:
    """Stop the cluster; when the test failed, print each broker's notable log lines first."""
    if getattr(request.node, "chaos_call_failed", False):
        for i in range(len(c.brokers)):
            try:
                lines = notable_lines(c.output(i))
            except OSError as e:
                lines = [f"(log unreadable: {e})"]
            print(f"--- broker {i}: last {len(lines)} warnings, errors and replication events ---")
            print("\n".join(lines))
    c.stop()


@pytest.fixture
def cluster(tmp_path, request):
    """ZooKeeper + 3 broker processes (replication factor 3, min.insync.replicas 2), with
    ZK_SESSION_MS ZooKeeper sessions unless the test is marked zk_session_ms(ms)."""
    marker = request.node.get_closest_marker("zk_session_ms")
    session_ms = int(marker.args[0]) if marker else ZK_SESSION_MS
    # A ZooKeeper of its own: a chaos test may fault it.
    c = Cluster(tmp_path / "cluster", brokers=3, zookeeper_session_timeout_ms=session_ms,
                own_zookeeper=True)
    c.start()
    try:
        yield c
    finally:
        stop_telling_a_failure(c, request)
