"""A connector's life in a Connect cluster of two workers, each request sent to the worker
that does NOT run what it names (so it is forwarded: to the leader for config changes, to
the owner for restarts): create, pause, resume, restart the task, stop (tasks gone),
offsets while stopped, resume, change the config (the task restarts with it), delete.
Every status is read from both workers, which must agree."""
from __future__ import annotations

from tests.support.connect_worker import ConnectWorker, wait_until


def _props(bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "group.id": "connect-ops",
            "offset.storage.topic": "ops-offsets", "config.storage.topic": "ops-configs",
            "status.storage.topic": "ops-status", "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "offset.storage.partitions": "2", "status.storage.partitions": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter"}


def test_lifecycle_across_two_workers(broker, tmp_path):
    workers = [ConnectWorker(tmp_path / f"w{i}", "distributed", _props(broker.bootstrap)).start()
               for i in range(2)]
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(1000)))
    try:
        a, b = workers
        code, body = a.rest("POST", "/connectors", {"name": "src", "config": {
            "connector.class": "FileStreamSource", "file": str(source), "topic": "ops"}})
        assert code == 201, body

        def state(expect_connector: str, expect_tasks: list[str]) -> dict | None:
            answers = [w.rest("GET", "/connectors/src/status") for w in workers]
            for code, st in answers:
                if code != 200 or st["connector"]["state"] != expect_connector or \
                        [t["state"] for t in st["tasks"]] != expect_tasks:
                    return None
            assert answers[0][1] == answers[1][1]        # both workers read the same topic
            return answers[0][1]

        st = wait_until(lambda: state("RUNNING", ["RUNNING"]), what="src running")
        owner = st["tasks"][0]["worker_id"]
        other = next(w for w in workers if w.worker_id != owner)

        assert other.rest("PUT", "/connectors/src/pause")[0] == 202
        wait_until(lambda: state("PAUSED", ["PAUSED"]), what="src paused")
        assert other.rest("PUT", "/connectors/src/resume")[0] == 202
        wait_until(lambda: state("RUNNING", ["RUNNING"]), what="src resumed")

        # A task restart asked of the worker that does not run it goes to its owner.
        code, body = other.rest("POST", "/connectors/src/tasks/0/restart")
        assert code == 204, body
        code, body = other.rest("POST", "/connectors/src/restart?includeTasks=true")
        assert code == 202 and body["tasks"][0]["state"] == "RESTARTING", body
        wait_until(lambda: state("RUNNING", ["RUNNING"]), what="src running after restarts")

        assert other.rest("PUT", "/connectors/src/stop")[0] == 204
        wait_until(lambda: state("STOPPED", []), what="src stopped")
        assert other.rest("GET", "/connectors/src/tasks") == (200, [])
        code, body = other.rest("GET", "/connectors/src/offsets")
        assert code == 200 and body["offsets"] == [
            {"partition": {"filename": str(source)}, "offset": {"position": source.stat().st_size}}]
        code, body = other.rest("PATCH", "/connectors/src/offsets", {"offsets": [
            {"partition": {"filename": str(source)}, "offset": {"position": 0}}]})
        assert code == 200, body
        code, body = a.rest("GET", "/connectors/src/offsets")
        assert body["offsets"][0]["offset"] == {"position": 0}

        assert other.rest("PUT", "/connectors/src/resume")[0] == 202
        wait_until(lambda: state("RUNNING", ["RUNNING"]), what="src running after stop")

        # A new config: the task runs again with it (the topic changes).
        code, body = other.rest("PUT", "/connectors/src/config", {
            "connector.class": "FileStreamSource", "file": str(source), "topic": "ops2"})
        assert code == 200, body

        def task_topic() -> str | None:
            code, tasks = b.rest("GET", "/connectors/src/tasks")
            return tasks[0]["config"]["topic"] if code == 200 and tasks else None
        assert wait_until(lambda: task_topic() == "ops2" or None, what="new task config") is True
        wait_until(lambda: state("RUNNING", ["RUNNING"]), what="src running with ops2")
        with open(source, "a") as f:                  # new lines go to the new topic
            f.write("".join(f"more {i}\n" for i in range(10)))
        wait_until(lambda: "ops2" in (a.rest("GET", "/connectors/src/topics")[1] or {})
                   .get("src", {}).get("topics", []), what="ops2 in the connector's topics")

        assert other.rest("DELETE", "/connectors/src")[0] == 204
        wait_until(lambda: all(w.rest("GET", "/connectors")[1] == [] for w in workers),
                   what="src gone everywhere")
        code, body = a.rest("GET", "/connectors/src/status")
        assert code == 404 and body["error_code"] == 404
    finally:
        for w in workers:
            w.stop()
