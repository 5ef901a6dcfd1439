"""The training deck's Kafka Connect flow, as a user types it: a distributed worker, then
curl POSTs a FileStreamSource and a FileStreamSink connector; 100,000 lines appended to the
source file while it is being read arrive in the sink file byte for byte, and
`GET /connectors?expand=status` shows both RUNNING. The worker uses the shipped
config/connect-distributed.properties (JsonConverter with schemas), with only the addresses
and the replication factors of a one-broker cluster changed."""
from __future__ import annotations

import json
import subprocess
import threading

from clients.properties import read_properties
from tests.support.broker_process import REPO
from tests.support.connect_worker import ConnectWorker, append_lines, expected_text, wait_until

LINES = 100_000


def curl(*args: str) -> tuple[int, object]:
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    body, _, code = out.rpartition("\n")
    return int(code), json.loads(body) if body.strip() else None


def shipped_distributed_config(bootstrap: str) -> dict[str, str]:
    props = {k: p.value for k, p in read_properties(REPO / "config/connect-distributed.properties").items()}
    props.pop("listeners", None)            # the test's worker listens on a free port
    props.update({"bootstrap.servers": bootstrap, "offset.storage.replication.factor": "1",
                  "config.storage.replication.factor": "1", "status.storage.replication.factor": "1",
                  "offset.storage.partitions": "5"})
    return props


def test_deck_flow_file_source_to_file_sink_with_curl(broker, tmp_path):
    worker = ConnectWorker(tmp_path / "worker", "distributed",
                           shipped_distributed_config(broker.bootstrap)).start()
    try:
        source, sink = tmp_path / "demo-input.txt", tmp_path / "demo-output.txt"
        source.write_text("")
        wait_until(lambda: worker.rest("GET", "/")[0] == 200, what="the REST API")
        writer = threading.Thread(target=append_lines, args=(source, 0, LINES // 2, 5000, 0.02))
        writer.start()                      # the file is being written while connectors start
        code, body = curl("-X", "POST", "-H", "Content-Type: application/json", "--data",
                          json.dumps({"name": "demo-producer", "config": {
                              "connector.class": "FileStreamSource", "tasks.max": "1",
                              "file": str(source), "topic": "demo"}}),
                          worker.url + "/connectors")
        assert code == 201, body
        assert body == {"name": "demo-producer", "tasks": [], "type": "source",
                        "config": {"connector.class": "FileStreamSource", "tasks.max": "1",
                                   "file": str(source), "topic": "demo", "name": "demo-producer"}}
        code, body = curl("-X", "POST", "-H", "Content-Type: application/json", "--data",
                          json.dumps({"name": "demo-consumer", "config": {
                              "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                              "tasks.max": "1", "file": str(sink), "topics": "demo"}}),
                          worker.url + "/connectors")
        assert code == 201, body
        writer.join()
        append_lines(source, LINES // 2, LINES // 2, 5000, 0.01)
        want = expected_text(LINES).encode()
        assert source.read_bytes() == want
        wait_until(lambda: sink.exists() and sink.stat().st_size >= len(want), timeout=120,
                   what="the sink file holding every line")
        assert sink.read_bytes() == want

        def both_running() -> object:
            code, body = curl(worker.url + "/connectors?expand=status")
            assert code == 200
            ok = all(body[n]["status"]["connector"]["state"] == "RUNNING"
                     and [t["state"] for t in body[n]["status"]["tasks"]] == ["RUNNING"]
                     for n in ("demo-producer", "demo-consumer"))
            return body if ok else None
        body = wait_until(both_running, what="RUNNING connectors")
        assert body["demo-producer"]["status"]["type"] == "source"
        assert body["demo-consumer"]["status"]["type"] == "sink"
        assert body["demo-producer"]["status"]["connector"]["worker_id"] == worker.worker_id

        # The worker's metrics, named as the JMX exporter names Kafka Connect's.
        text = subprocess.run(["curl", "-s", worker.url + "/metrics"], capture_output=True,
                              text=True, timeout=30, check=True).stdout
        samples = dict(line.rsplit(" ", 1) for line in text.splitlines()
                       if line and not line.startswith("#"))
        assert float(samples["kafka_connect_connect_worker_metrics_connector_count"]) == 2
        assert float(samples["kafka_connect_connect_worker_metrics_task_count"]) == 2
        assert float(samples["kafka_connect_connect_worker_metrics_connector_running_task_count"]) == 2
        labels = '{connector="demo-producer",task="0"}'
        assert float(samples["kafka_connect_source_task_metrics_source_record_write_total" + labels]) >= LINES
        labels = '{connector="demo-consumer",task="0"}'
        assert float(samples["kafka_connect_sink_task_metrics_sink_record_send_total" + labels]) >= LINES
        assert float(samples["kafka_connect_connect_worker_rebalance_metrics_completed_rebalances_total"]) >= 1
    finally:
        worker.stop()
