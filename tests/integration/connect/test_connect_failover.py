"""Three distributed workers; kill -9 of the one running the FileStreamSource task while
lines are appended: the task runs again on another worker within the session timeout plus
`scheduled.rebalance.max.delay.ms` (the time the group needs to notice the death, then the
time lost work waits for its worker to return), and every line arrives.

- at least once (the default): every line is in the sink file; duplicates are allowed
  (what the dead task sent after its last offset commit is sent again).
- exactly once (`exactly.once.source.support=enabled`, KIP-618): the topic holds every line
  exactly once, in order. The sink reading it runs in a standalone worker that is not
  killed (FileStreamSink is at-least-once by design, as Kafka's: a killed sink re-appends
  what it wrote after its last commit), with read_committed, so the sink file equals the
  source file byte for byte.

`--long` kills the source task's worker again after each recovery (3 rounds)."""
from __future__ import annotations

import threading
import time

import pytest

from tests.support.connect_worker import ConnectWorker, append_lines, expected_text, wait_until

SESSION_MS = 3000
DELAY_MS = 3000
CHUNK = 500


def _worker_props(bootstrap: str, exactly_once: bool) -> dict[str, str]:
    props = {"bootstrap.servers": bootstrap, "group.id": "connect-failover",
             "offset.storage.topic": "fo-offsets", "config.storage.topic": "fo-configs",
             "status.storage.topic": "fo-status", "offset.storage.replication.factor": "1",
             "config.storage.replication.factor": "1", "status.storage.replication.factor": "1",
             "offset.storage.partitions": "3", "status.storage.partitions": "2",
             "key.converter": "org.apache.kafka.connect.storage.StringConverter",
             "value.converter": "org.apache.kafka.connect.storage.StringConverter",
             "session.timeout.ms": str(SESSION_MS), "heartbeat.interval.ms": "500",
             "scheduled.rebalance.max.delay.ms": str(DELAY_MS)}
    if exactly_once:
        props["exactly.once.source.support"] = "enabled"
    return props


def _source_owner(w: ConnectWorker) -> str | None:
    code, body = w.rest("GET", "/connectors/src/status")
    if code != 200:
        return None
    tasks = body.get("tasks") or []
    if tasks and tasks[0]["state"] == "RUNNING":
        return tasks[0]["worker_id"]
    return None


class _Writer(threading.Thread):
    """Appends chunks of lines until told to stop; `written` lines so far."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.written, self.halt = path, 0, threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            append_lines(self.path, self.written, CHUNK)
            self.written += CHUNK
            time.sleep(0.05)


@pytest.mark.alone
@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_source_task_moves_when_its_worker_is_killed(broker_factory, tmp_path, exactly_once,
                                                     long_run):
    # The broker lets groups time out in 3 s (its default floor is 6 s), to keep this short.
    broker = broker_factory({"group.min.session.timeout.ms": "1000"})
    props = _worker_props(broker.bootstrap, exactly_once)
    workers = [ConnectWorker(tmp_path / f"w{i}", "distributed", props).start() for i in range(3)]
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("")
    sink_worker = None
    try:
        w0 = workers[0]
        wait_until(lambda: all(w.rest("GET", "/connectors")[0] == 200 for w in workers),
                   what="three workers serving")
        code, body = w0.rest("POST", "/connectors", {"name": "src", "config": {
            "connector.class": "FileStreamSource", "file": str(source), "topic": "fo"}})
        assert code == 201, body
        sink_config = {"connector.class": "FileStreamSink", "file": str(sink), "topics": "fo"}
        if exactly_once:
            sink_worker = ConnectWorker(tmp_path / "sink", "standalone", {
                "bootstrap.servers": broker.bootstrap,
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                "consumer.isolation.level": "read_committed"}).start()
            code, body = sink_worker.rest("POST", "/connectors", {"name": "snk", "config": sink_config})
        else:
            code, body = workers[1].rest("POST", "/connectors", {"name": "snk", "config": sink_config})
        assert code == 201, body

        writer = _Writer(source)
        writer.start()
        alive = list(workers)
        for _ in range(3 if long_run else 1):
            owner = wait_until(lambda: _source_owner(alive[0]), what="the source task running")
            wait_until(lambda: sink.exists() and sink.stat().st_size > 0, what="lines in the sink")
            victim = next(w for w in alive if w.worker_id == owner)
            victim.kill9()
            killed_at = time.monotonic()
            alive.remove(victim)
            survivor = alive[0]
            new_owner = wait_until(
                lambda: (o := _source_owner(survivor)) and o != owner and o,
                timeout=(SESSION_MS + DELAY_MS) / 1000 + 30, interval=0.1,
                what="the source task running on another worker")
            took = time.monotonic() - killed_at
            print(f"source task moved from {owner} to {new_owner} in {took:.1f}s "
                  f"(session.timeout.ms={SESSION_MS}, scheduled.rebalance.max.delay.ms={DELAY_MS})")
            assert took <= (SESSION_MS + DELAY_MS) / 1000 + 5.0
            if len(alive) == 1:
                break
            # Bring a worker back so the next round has one to kill and one to survive.
            replacement = ConnectWorker(victim.workdir.parent / f"{victim.workdir.name}b",
                                        "distributed", props).start()
            alive.append(replacement)
            workers.append(replacement)
        time.sleep(1.0)
        writer.halt.set()
        writer.join()
        total = writer.written
        want = expected_text(total)
        wanted_lines = want.splitlines()

        def all_lines_arrived() -> bool:
            got = set(sink.read_text().splitlines()) if sink.exists() else set()
            return len(got) >= total and got >= set(wanted_lines)
        wait_until(all_lines_arrived, timeout=120, what=f"all {total} lines in the sink")
        lines = sink.read_text().splitlines()
        assert set(lines) == set(wanted_lines)
        print(f"{total} lines written, {len(lines)} in the sink "
              f"({len(lines) - total} duplicates)")
        if exactly_once:
            assert sink.read_text() == want
    finally:
        for w in workers:
            w.stop()
        if sink_worker is not None:
            sink_worker.stop()
