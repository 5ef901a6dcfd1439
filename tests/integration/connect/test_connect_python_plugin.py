"""The Python connector pair of docs/CONNECT.md (docs/examples/connect-plugins/word_count.py)
runs in a distributed Connect cluster of two workers that find it through plugin.path:
the word counts the sink writes equal the text's, and both plugins are listed by
GET /connector-plugins."""
from __future__ import annotations

import collections
import json

from tests.support.broker_process import REPO
from tests.support.connect_worker import ConnectWorker, wait_until

TEXT = ("the quick brown fox jumps over the lazy dog and the dog sleeps while the fox "
        "runs far away from the quick dog ") * 300


def test_docs_python_connectors_run_in_distributed_mode(broker, tmp_path):
    props = {"bootstrap.servers": broker.bootstrap, "group.id": "connect-python",
             "offset.storage.topic": "py-offsets", "config.storage.topic": "py-configs",
             "status.storage.topic": "py-status", "offset.storage.replication.factor": "1",
             "config.storage.replication.factor": "1", "status.storage.replication.factor": "1",
             "offset.storage.partitions": "2", "status.storage.partitions": "1",
             "key.converter": "org.apache.kafka.connect.storage.StringConverter",
             "value.converter": "org.apache.kafka.connect.storage.StringConverter",
             "plugin.path": str(REPO / "docs/examples/connect-plugins")}
    workers = [ConnectWorker(tmp_path / f"w{i}", "distributed", props).start() for i in range(2)]
    text, counts = tmp_path / "text.txt", tmp_path / "counts.json"
    text.write_text(TEXT)
    try:
        w0, w1 = workers
        wait_until(lambda: all(w.rest("GET", "/connectors")[0] == 200 for w in workers),
                   what="two workers serving")
        code, plugins = w1.rest("GET", "/connector-plugins")
        assert code == 200
        classes = {p["class"]: p["type"] for p in plugins}
        assert classes["word_count.WordsSourceConnector"] == "source"
        assert classes["word_count.WordCountSink"] == "sink"
        # Created on different workers: whichever is not the leader forwards to it.
        code, body = w0.rest("POST", "/connectors", {"name": "words", "config": {
            "connector.class": "WordsSource", "file": str(text), "topic": "words"}})
        assert code == 201, body
        code, body = w1.rest("POST", "/connectors", {"name": "counts", "config": {
            "connector.class": "word_count.WordCountSink", "topics": "words",
            "counts.file": str(counts)}})
        assert code == 201, body
        want = dict(collections.Counter(TEXT.split()))

        def counted() -> bool:
            return counts.exists() and json.loads(counts.read_text()) == want
        wait_until(counted, timeout=90, what="the word counts")

        def running() -> bool:
            for name in ("words", "counts"):
                code, st = w1.rest("GET", f"/connectors/{name}/status")
                if code != 200 or st["connector"]["state"] != "RUNNING" or \
                        [t["state"] for t in st["tasks"]] != ["RUNNING"]:
                    return False
            return True
        wait_until(running, what="both connectors RUNNING")
        owners = {w1.rest("GET", f"/connectors/{n}/status")[1]["tasks"][0]["worker_id"]
                  for n in ("words", "counts")}
        assert owners <= {w.worker_id for w in workers}
    finally:
        for w in workers:
            w.stop()
