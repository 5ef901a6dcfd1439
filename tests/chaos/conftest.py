import re

import pytest

from tests.support.cluster import Cluster

# A chaos failure seen once in CI is gone with its temporary directory: on failure, the
# brokers' warnings and errors, and their replication story (leadership, ISR, truncation),
# go into the report (pytest shows teardown output then).
_NOTABLE = re.compile(r"^\[[^\]]*\] (WARNING |ERROR |CRITICAL |INFO broker\.replication\.|INFO strom\.broker: .*ISR)")
_MAX_LINES_PER_BROKER = 60


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
    """ZooKeeper + 3 broker processes (replication factor 3, min.insync.replicas 2)."""
    c = Cluster(tmp_path / "cluster", brokers=3)
    c.start()
    try:
        yield c
    finally:
        stop_telling_a_failure(c, request)
