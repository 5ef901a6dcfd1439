"""Every endpoint of Kafka Connect's REST API, walked with curl against one real standalone
worker process and one broker, each answer checked against the body Kafka Connect documents
(status codes, field names, error bodies `{"error_code", "message"}`).

One worker serves the whole walk, so the stages run in order inside one test: a source
connector (FileStreamSource whose records are hoisted into a map, routed to another topic by
RegexRouter and given a static field by InsertField) is created, inspected, reconfigured,
restarted, paused, resumed, stopped, has its offsets read, altered and reset, and is
deleted; a FileStreamSink connector shows its consumer offsets. The records the transforms
produced are read back from the routed topic with strom's consumer.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from clients.admin import AdminClient
from clients.consumer import Consumer
from tests.support.connect_worker import ConnectWorker, wait_until

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
LINES = ["alpha", "beta", "gamma"]
RAW_TOPIC, ROUTED_TOPIC = "rest-raw", "rest-routed"


# ---------------------------------------------------------------------------- curl

def curl_full(method: str, url: str, body: Any = None, *,
              raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:
    """(status, headers with lower-cased names, parsed JSON body or None) of one request
    made by /usr/bin/curl, as a user's script makes it."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    # "Expect:" keeps curl from sending Expect: 100-continue (an interim answer to parse).
    args = ["/usr/bin/curl", "-s", "-i", "-X", method, "-H", "Accept: application/json",
            "-H", "Expect:", "--max-time", "30"]
    if data is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    out = subprocess.run([*args, url], input=data or b"", capture_output=True, timeout=40,
                         check=True).stdout
    head, _, payload = out.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(status_line.split()[1]), headers, json.loads(payload) if payload.strip() else None


def curl(method: str, url: str, body: Any = None, *, raw: bytes | None = None) -> tuple[int, Any]:
    """(status, parsed JSON body or None)."""
    status, _, parsed = curl_full(method, url, body, raw=raw)
    return status, parsed


class Api:
    """The worker's REST API by path: `api("GET", "/connectors")`."""

    def __init__(self, base: str, worker_id: str):
        self.base = base
        self.worker_id = worker_id          # host:port, as statuses name the worker

    def __call__(self, method: str, path: str, body: Any = None, *,
                 raw: bytes | None = None) -> tuple[int, Any]:
        return curl(method, self.base + path, body, raw=raw)

    def full(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        return curl_full(method, self.base + path, body)

    def state(self, name: str) -> tuple[str, list[str]]:
        """(connector state, [task states]) of GET .../status."""
        code, body = self("GET", f"/connectors/{name}/status")
        assert code == 200, body
        return body["connector"]["state"], [t["state"] for t in body["tasks"]]

    def wait_state(self, name: str, connector: str, tasks: list[str], timeout: float = 15) -> None:
        wait_until(lambda: self.state(name) == (connector, tasks), timeout=timeout, interval=0.1,
                   what=f"{name} {connector} with tasks {tasks}")


def assert_error(code: int, body: Any, status: int, *words: str) -> None:
    """Kafka Connect's ErrorMessage: {"error_code": status, "message": ...} naming `words`."""
    assert code == status, (code, body)
    assert isinstance(body, dict) and set(body) == {"error_code", "message"}, body
    assert body["error_code"] == status, body
    for word in words:
        assert word in body["message"], (word, body)


# ---------------------------------------------------------------------------- stages

def check_root(api: Api, bootstrap: str) -> None:
    # The listener opens before the herder has read the cluster id (clients/connect/main.py
    # starts the REST server first), so the id is awaited rather than asserted at once.
    def with_cluster_id() -> tuple[int, Any] | None:
        code, body = api("GET", "/")
        return (code, body) if code == 200 and body.get("kafka_cluster_id") else None

    code, body = wait_until(with_cluster_id, timeout=10, interval=0.05,
                            what="GET / with the Kafka cluster id")
    assert set(body) == {"version", "commit", "kafka_cluster_id"}, body
    assert body["version"] and body["commit"], body
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        cluster_id = admin.describe_cluster().cluster_id
    assert cluster_id and body["kafka_cluster_id"] == cluster_id, (body, cluster_id)


def check_plugins(api: Api) -> None:
    code, body = api("GET", "/connector-plugins")
    assert code == 200, body
    assert all(set(p) == {"class", "type", "version"} and p["version"] for p in body), body
    by_class = {p["class"]: p for p in body}
    assert by_class[FILE_SOURCE]["type"] == "source", body
    assert by_class[FILE_SINK]["type"] == "sink", body
    assert {p["type"] for p in body} <= {"source", "sink"}, body       # connectorsOnly defaults to true

    code, every = api("GET", "/connector-plugins?connectorsOnly=false")
    assert code == 200, every
    # A converter that is also a HeaderConverter is listed once per type, as Kafka lists it.
    kinds = {(p["class"], p["type"]) for p in every}
    assert all(set(p) == {"class", "type", "version"} and p["version"] for p in every), every
    assert {(p["class"], p["type"]) for p in body} < kinds, every
    assert {("org.apache.kafka.connect.json.JsonConverter", "converter"),
            ("org.apache.kafka.connect.json.JsonConverter", "header_converter"),
            ("org.apache.kafka.connect.storage.StringConverter", "converter"),
            ("org.apache.kafka.connect.storage.SimpleHeaderConverter", "header_converter"),
            ("org.apache.kafka.connect.transforms.RegexRouter", "transformation"),
            ("org.apache.kafka.connect.transforms.InsertField$Value", "transformation"),
            ("org.apache.kafka.connect.transforms.HoistField$Value", "transformation"),
            ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicate")} <= kinds, every

    # KIP-769: each key's ConfigKeyInfo
    code, keys = api("GET", "/connector-plugins/FileStreamSinkConnector/config")
    assert code == 200, keys
    by_name = {k["name"]: k for k in keys}
    assert "file" in by_name, keys
    # Kafka's ConfigKeyInfo serializes its order as "order" (its creator reads "order_in_group")
    assert set(by_name["file"]) == {"name", "type", "required", "default_value", "importance",
                                    "documentation", "group", "order", "width",
                                    "display_name", "dependents"}, by_name["file"]
    assert by_name["file"]["type"] == "STRING" and by_name["file"]["importance"] == "HIGH", by_name["file"]
    code, keys = api("GET", "/connector-plugins/org.apache.kafka.connect.transforms.RegexRouter/config")
    assert code == 200, keys
    assert {k["name"] for k in keys} >= {"regex", "replacement"}, keys
    code, body = api("GET", "/connector-plugins/NoSuchPlugin/config")
    assert_error(code, body, 404, "NoSuchPlugin")


def check_validate(api: Api, sink_file: Path) -> None:
    path = "/connector-plugins/FileStreamSinkConnector/config/validate"
    good = {"name": "checked", "connector.class": FILE_SINK, "tasks.max": "1",
            "topics": ROUTED_TOPIC, "file": str(sink_file)}
    code, body = api("PUT", path, good)
    assert code == 200, body
    assert set(body) == {"name", "error_count", "groups", "configs"}, body
    assert body["name"] == FILE_SINK and body["error_count"] == 0, body
    assert "Common" in body["groups"], body
    values = {c["value"]["name"]: c["value"] for c in body["configs"]}
    assert set(values["file"]) == {"name", "value", "recommended_values", "errors", "visible"}, values["file"]
    assert values["file"]["value"] == str(sink_file) and values["file"]["errors"] == [], values["file"]
    assert body["configs"][0]["definition"]["name"] == body["configs"][0]["value"]["name"], body["configs"][0]

    def errors(config: dict[str, str]) -> tuple[int, dict[str, list[str]]]:
        code, body = api("PUT", path, config)
        assert code == 200, body               # a config with errors is still a 200
        return body["error_count"], {c["value"]["name"]: c["value"]["errors"]
                                     for c in body["configs"] if c["value"]["errors"]}

    count, bad = errors({k: v for k, v in good.items() if k != "topics"})
    assert count >= 1 and "topics" in bad, bad
    count, bad = errors({**good, "tasks.max": "0"})
    assert count >= 1 and "tasks.max" in bad, bad
    count, bad = errors({**good, "transforms": "x", "transforms.x.type": "com.example.NoSuchTransform"})
    assert count >= 1 and "transforms.x.type" in bad, bad
    assert any("com.example.NoSuchTransform" in e for e in bad["transforms.x.type"]), bad

    # the connector.class of the body must name the plugin of the path
    code, body = api("PUT", path, {**good, "connector.class": FILE_SOURCE})
    assert_error(code, body, 400, FILE_SOURCE)


def source_config(source_file: Path) -> dict[str, str]:
    """FileStreamSource into RAW_TOPIC; each line hoisted into {"line": ...}, routed to
    ROUTED_TOPIC and given the static field origin=strom; JSON values without schemas."""
    return {"connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source_file),
            "topic": RAW_TOPIC,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "transforms": "hoist,route,insert",
            "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
            "transforms.hoist.field": "line",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "rest-(.*)",
            "transforms.route.replacement": "rest-routed",
            "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.insert.static.field": "origin",
            "transforms.insert.static.value": "strom"}


def check_create(api: Api, source_file: Path) -> dict[str, str]:
    config = source_config(source_file)
    code, headers, body = api.full("POST", "/connectors", {"name": "src", "config": config})
    assert code == 201, body
    assert headers["location"] == f"{api.base}/connectors/src", headers
    assert body["name"] == "src" and body["type"] == "source", body
    assert body["config"] == {**config, "name": "src"}, body
    assert set(body) == {"name", "config", "tasks", "type"}, body

    code, body = api("POST", "/connectors", {"name": "src", "config": config})
    assert_error(code, body, 409, "src", "already exists")
    code, body = api("POST", "/connectors", {"name": "bad", "config": {**config, "tasks.max": "0"}})
    assert_error(code, body, 400, "tasks.max")
    code, body = api("POST", "/connectors", {"config": config})
    assert_error(code, body, 400)
    api.wait_state("src", "RUNNING", ["RUNNING"])
    return {**config, "name": "src"}


def check_transformed_records(bootstrap: str) -> None:
    with Consumer(ROUTED_TOPIC, bootstrap_servers=bootstrap, group_id="rest-live-check",
                  auto_offset_reset="earliest") as consumer:
        got: list[Any] = []
        deadline = time.monotonic() + 15
        while len(got) < len(LINES) and time.monotonic() < deadline:
            got += consumer.poll(0.5)
    values = [json.loads(r.value) for r in got]
    assert values == [{"line": line, "origin": "strom"} for line in LINES], values
    assert all(r.topic == ROUTED_TOPIC for r in got), got
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        assert RAW_TOPIC not in admin.list_topics(), "RegexRouter did not route the records"


def check_listing(api: Api, config: dict[str, str]) -> None:
    code, body = api("GET", "/connectors")
    assert (code, body) == (200, ["src"])                   # "bad" was never created
    code, body = api("GET", "/connectors?expand=status")
    assert code == 200, body
    assert set(body) == {"src"} and set(body["src"]) == {"status"}, body
    status = body["src"]["status"]
    assert status["name"] == "src" and status["type"] == "source", status
    assert status["connector"] == {"state": "RUNNING", "worker_id": api.worker_id}, status
    assert [(t["id"], t["state"]) for t in status["tasks"]] == [(0, "RUNNING")], status
    code, body = api("GET", "/connectors?expand=info")
    assert code == 200, body
    assert body == {"src": {"info": {"name": "src", "config": config, "type": "source",
                                     "tasks": [{"connector": "src", "task": 0}]}}}, body
    code, body = api("GET", "/connectors?expand=status&expand=info")
    assert code == 200, body
    assert set(body["src"]) == {"status", "info"}, body
    assert body["src"]["info"]["config"] == config, body


def check_config_and_info(api: Api, config: dict[str, str]) -> dict[str, str]:
    code, body = api("GET", "/connectors/src/config")
    assert (code, body) == (200, config)

    changed = {**config, "batch.size": "500"}
    code, body = api("PUT", "/connectors/src/config", changed)
    assert code == 200, body                       # replaced, not created
    assert body["name"] == "src" and body["config"] == changed and body["type"] == "source", body
    code, body = api("PUT", "/connectors/src/config", {**changed, "name": "other"})
    assert_error(code, body, 400, "other", "src")

    # KIP-477: a null removes a key
    code, body = api("PATCH", "/connectors/src/config", {"batch.size": None, "transforms.hoist.field": "line"})
    assert code == 200, body
    assert body["config"] == config, body
    code, body = api("GET", "/connectors/src/config")
    assert (code, body) == (200, config)

    api.wait_state("src", "RUNNING", ["RUNNING"])
    code, body = api("GET", "/connectors/src")
    assert code == 200, body
    assert body == {"name": "src", "config": config, "type": "source",
                    "tasks": [{"connector": "src", "task": 0}]}, body

    code, body = api("GET", "/connectors/src/status")
    assert code == 200, body
    assert set(body) == {"name", "connector", "tasks", "type"}, body
    worker_id = api.worker_id
    assert body["connector"] == {"state": "RUNNING", "worker_id": worker_id}, body
    assert body["tasks"] == [{"id": 0, "state": "RUNNING", "worker_id": worker_id}], body

    code, body = api("GET", "/connectors/src/tasks")
    assert code == 200, body
    assert len(body) == 1 and body[0]["id"] == {"connector": "src", "task": 0}, body
    assert body[0]["config"]["file"] == config["file"], body
    assert body[0]["config"]["topic"] == RAW_TOPIC, body

    code, body = api("GET", "/connectors/src/tasks/0/status")
    assert (code, body) == (200, {"id": 0, "state": "RUNNING", "worker_id": worker_id})
    code, body = api("GET", "/connectors/src/tasks/7/status")
    assert_error(code, body, 404)
    return config


def check_restarts(api: Api) -> None:
    code, body = api("POST", "/connectors/src/restart")
    assert (code, body) == (204, None)
    api.wait_state("src", "RUNNING", ["RUNNING"])

    code, body = api("POST", "/connectors/src/restart?includeTasks=true&onlyFailed=false")
    assert code == 202, body
    assert body["name"] == "src" and body["type"] == "source", body
    assert body["connector"]["state"] == "RESTARTING", body
    assert [(t["id"], t["state"]) for t in body["tasks"]] == [(0, "RESTARTING")], body
    api.wait_state("src", "RUNNING", ["RUNNING"])

    code, body = api("POST", "/connectors/src/tasks/0/restart")
    assert (code, body) == (204, None)
    api.wait_state("src", "RUNNING", ["RUNNING"])
    code, body = api("POST", "/connectors/src/tasks/3/restart")
    assert_error(code, body, 404)


def check_pause_resume(api: Api) -> None:
    code, body = api("PUT", "/connectors/src/pause")
    assert (code, body) == (202, None)
    api.wait_state("src", "PAUSED", ["PAUSED"])
    code, body = api("PUT", "/connectors/src/resume")
    assert (code, body) == (202, None)
    api.wait_state("src", "RUNNING", ["RUNNING"])


def check_topics(api: Api) -> None:
    code, body = api("GET", "/connectors/src/topics")
    assert (code, body) == (200, {"src": {"topics": [ROUTED_TOPIC]}})
    code, body = api("PUT", "/connectors/src/topics/reset")
    assert code == 202, body
    code, body = api("GET", "/connectors/src/topics")
    assert (code, body) == (200, {"src": {"topics": []}})


def check_source_offsets(api: Api, source_file: Path) -> None:
    size = source_file.stat().st_size
    want = {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": size}}]}
    wait_until(lambda: api("GET", "/connectors/src/offsets") == (200, want), timeout=15,
               what="the source offset at the end of the file")

    patch = {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 6}}]}
    code, body = api("PATCH", "/connectors/src/offsets", patch)
    assert_error(code, body, 400, "STOPPED", "/connectors/src/stop")
    code, body = api("DELETE", "/connectors/src/offsets")
    assert_error(code, body, 400, "STOPPED")

    code, body = api("PUT", "/connectors/src/stop")
    assert (code, body) == (204, None)
    api.wait_state("src", "STOPPED", [])
    code, body = api("GET", "/connectors/src/tasks")
    assert (code, body) == (200, [])
    code, body = api("GET", "/connectors/src")
    assert code == 200 and body["tasks"] == [], body

    code, body = api("PATCH", "/connectors/src/offsets", patch)
    assert code == 200, body
    assert body == {"message": "The offsets for this connector have been altered successfully"}, body
    code, body = api("GET", "/connectors/src/offsets")
    assert (code, body) == (200, patch)

    code, body = api("DELETE", "/connectors/src/offsets")
    assert code == 200, body
    assert body == {"message": "The offsets for this connector have been reset successfully"}, body
    code, body = api("GET", "/connectors/src/offsets")
    assert (code, body) == (200, {"offsets": []})


def check_sink_offsets(api: Api, sink_file: Path) -> None:
    config = {"connector.class": FILE_SINK, "tasks.max": "1", "topics": ROUTED_TOPIC,
              "file": str(sink_file),
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}
    # PUT creates a connector that does not exist yet: 201
    code, headers, body = api.full("PUT", "/connectors/snk/config", config)
    assert code == 201, body
    assert headers["location"] == f"{api.base}/connectors/snk", headers
    assert body["type"] == "sink", body
    want = {"offsets": [{"partition": {"kafka_topic": ROUTED_TOPIC, "kafka_partition": 0},
                         "offset": {"kafka_offset": len(LINES)}}]}
    wait_until(lambda: api("GET", "/connectors/snk/offsets") == (200, want), timeout=20,
               what="the sink's committed offset")
    assert sink_file.read_text().count("strom") == len(LINES)

    code, body = api("DELETE", "/connectors/snk")
    assert (code, body) == (204, None)


def check_delete(api: Api) -> None:
    code, body = api("DELETE", "/connectors/src")
    assert (code, body) == (204, None)
    code, body = api("GET", "/connectors/src")
    assert_error(code, body, 404, "src")
    code, body = api("GET", "/connectors")
    assert (code, body) == (200, [])


def check_bad_requests(api: Api) -> None:
    code, body = api("POST", "/connectors", raw=b'{"name": "broken", "config": {')
    assert_error(code, body, 400)
    code, body = api("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate", raw=b"[1, 2")
    assert_error(code, body, 400)
    code, body = api("GET", "/connectors")          # the worker still answers
    assert code == 200 and "broken" not in body, body

    for method, path in [("GET", "/connectors/ghost"), ("GET", "/connectors/ghost/config"),
                         ("GET", "/connectors/ghost/status"), ("GET", "/connectors/ghost/tasks"),
                         ("GET", "/connectors/ghost/tasks/0/status"),
                         ("POST", "/connectors/ghost/restart"), ("PUT", "/connectors/ghost/pause"),
                         ("PUT", "/connectors/ghost/resume"), ("PUT", "/connectors/ghost/stop"),
                         ("GET", "/connectors/ghost/topics"), ("GET", "/connectors/ghost/offsets"),
                         ("DELETE", "/connectors/ghost")]:
        code, body = api(method, path)
        assert code == 404, (method, path, code, body)      # which path, on failure
        assert_error(code, body, 404)
    code, body = api("PATCH", "/connectors/ghost/config", {"tasks.max": "2"})
    assert_error(code, body, 404, "ghost")


# ---------------------------------------------------------------------------- the walk

def test_every_rest_endpoint_with_curl_against_one_standalone_worker(broker, tmp_path):
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    source_file.write_text("".join(line + "\n" for line in LINES))
    worker = ConnectWorker(tmp_path / "worker", "standalone", {"bootstrap.servers": broker.bootstrap})
    worker.start()
    api = Api(worker.url, worker.worker_id)
    try:
        check_root(api, broker.bootstrap)
        check_plugins(api)
        check_validate(api, sink_file)
        check_bad_requests(api)
        config = check_create(api, source_file)
        check_transformed_records(broker.bootstrap)
        check_listing(api, config)
        check_config_and_info(api, config)
        check_restarts(api)
        check_pause_resume(api)
        check_topics(api)
        check_sink_offsets(api, sink_file)
        check_source_offsets(api, source_file)
        check_delete(api)
    except BaseException:
        print(worker.output()[-6000:])          # the worker's side of a failure
        raise
    finally:
        worker.stop()
