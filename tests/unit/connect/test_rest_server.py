"""Kafka Connect's REST API (clients.connect.rest) driven over HTTP against an in-memory
herder: every route's status code and body as Kafka's docs show them, the error bodies
(404 unknown connector or path, 405, 400 for malformed JSON with the server still serving,
413 over 10 MiB, 500 for the unexpected and for a timeout), and forwarding to the leader
across real listeners (hops counted by ?forward, 409 when they run out)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from clients.connect.errors import (AlreadyExistsError, BadRequestError, NotFoundError,
                                    NotLeaderError)
from clients.connect.rest.server import ConnectRestServer, parse_listener
from clients.connect.runtime.herder import connector_info_json

WORKER = "fakehost:8083"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
PLUGINS = [
    {"class": SINK, "type": "sink", "version": "3.9.0"},
    {"class": SOURCE, "type": "source", "version": "3.9.0"},
    {"class": "org.apache.kafka.connect.storage.StringConverter", "type": "converter", "version": "3.9.0"},
]
# The example of Kafka's docs (POST /connectors), with a plugin this worker has.
HDFS_CONFIG = {"connector.class": SINK, "tasks.max": "2", "topics": "test-topic", "file": "/tmp/out.txt"}


class FakeHerder:
    """The Herder Protocol over dicts. `fail_with`, when set, is raised by every call."""

    kafka_cluster_id = "kUc4_nzBQ5mZkVnFW1Hrng"
    worker_id = WORKER

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.target_states: dict[str, str] = {}
        self.failed_tasks: dict[str, set[int]] = {}
        self.topics: dict[str, list[str]] = {}
        self.offsets: dict[str, list[dict[str, Any]]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.fail_with: Exception | None = None
        self.delay = 0.0

    async def _connector(self, name: str) -> dict[str, str]:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail_with is not None:
            raise self.fail_with
        if name not in self.configs:
            raise NotFoundError(f"Connector {name} not found")
        return self.configs[name]

    def _kind(self, name: str) -> str:
        return "sink" if "Sink" in self.configs[name]["connector.class"] else "source"

    def _tasks(self, name: str) -> int:
        return int(self.configs[name].get("tasks.max", "1"))

    def _info(self, name: str) -> dict[str, Any]:
        return connector_info_json(name, self.configs[name], self._tasks(name), self._kind(name))

    def _task_state(self, name: str, i: int) -> dict[str, Any]:
        if i in self.failed_tasks.get(name, set()):
            return {"id": i, "state": "FAILED", "worker_id": WORKER,
                    "trace": "org.apache.kafka.common.errors.RecordTooLargeException\n"}
        state = {"STARTED": "RUNNING"}.get(self.target_states[name], self.target_states[name])
        return {"id": i, "state": state, "worker_id": WORKER}

    async def connectors(self) -> list[str]:
        if self.fail_with is not None:
            raise self.fail_with
        return sorted(self.configs)

    async def connector_info(self, name: str) -> dict[str, Any]:
        await self._connector(name)
        return self._info(name)

    async def connector_config(self, name: str) -> dict[str, str]:
        return dict(await self._connector(name))

    async def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append(("put", name, allow_replace, initial_state))
        if name in self.configs and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        if "connector.class" not in config:
            raise BadRequestError(f"Connector config {config} contains no connector type")
        created = name not in self.configs
        self.configs[name] = dict(config)
        if created:
            self.target_states[name] = {"PAUSED": "PAUSED", "STOPPED": "STOPPED"}.get(initial_state or "", "STARTED")
        return created, self._info(name)

    async def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> dict[str, Any]:
        config = await self._connector(name)
        for k, v in patch.items():
            if v is None:
                config.pop(k, None)
            else:
                config[k] = v
        return self._info(name)

    async def delete_connector(self, name: str) -> None:
        await self._connector(name)
        del self.configs[name]

    async def connector_status(self, name: str) -> dict[str, Any]:
        await self._connector(name)
        return {"name": name, "connector": {"state": self._task_state(name, -1)["state"], "worker_id": WORKER},
                "tasks": [self._task_state(name, i) for i in range(self._tasks(name))],
                "type": self._kind(name)}

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        config = await self._connector(name)
        return [{"id": {"connector": name, "task": i}, "config": {"task.class": config["connector.class"] + "Task",
                                                                   "topics": config.get("topics", "")}}
                for i in range(self._tasks(name))]

    async def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        await self._connector(name)
        if task_id >= self._tasks(name):
            raise NotFoundError(f"No status found for task {name}-{task_id}")
        return self._task_state(name, task_id)

    async def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        await self._connector(name)
        self.calls.append(("restart", name, include_tasks, only_failed))
        if not include_tasks and not only_failed:
            return None
        status = await self.connector_status(name)
        for task in status["tasks"]:
            if include_tasks and (not only_failed or task["state"] == "FAILED"):
                task["state"] = "RESTARTING"
                task.pop("trace", None)
        if not only_failed:
            status["connector"]["state"] = "RESTARTING"
        return status

    async def restart_task(self, name: str, task_id: int) -> None:
        await self.task_status(name, task_id)
        self.failed_tasks.get(name, set()).discard(task_id)

    async def pause_connector(self, name: str) -> None:
        await self._connector(name)
        self.target_states[name] = "PAUSED"

    async def resume_connector(self, name: str) -> None:
        await self._connector(name)
        self.target_states[name] = "STARTED"

    async def stop_connector(self, name: str) -> None:
        await self._connector(name)
        self.target_states[name] = "STOPPED"

    async def connector_topics(self, name: str) -> list[str]:
        await self._connector(name)
        return self.topics.get(name, [])

    async def reset_connector_topics(self, name: str) -> None:
        await self._connector(name)
        self.topics[name] = []

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        await self._connector(name)
        return {"offsets": self.offsets.get(name, [])}

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        await self._connector(name)
        if self.target_states[name] != "STOPPED":
            raise BadRequestError("Connectors must be in the STOPPED state before their offsets can be modified. "
                                  "This can be done for the specified connector by issuing a 'PUT' request "
                                  f"to the '/connectors/{name}/stop' endpoint")
        self.offsets[name] = offsets
        return "The offsets for this connector have been altered successfully"

    async def reset_connector_offsets(self, name: str) -> str:
        await self._connector(name)
        self.offsets.pop(name, None)
        return "The offsets for this connector have been reset successfully"

    def connector_plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        return [p for p in PLUGINS if not connectors_only or p["type"] in ("source", "sink")]

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        if plugin not in (SINK, "FileStreamSink", "FileStreamSinkConnector"):
            raise NotFoundError(f"Unknown plugin {plugin}.")
        return [{"name": "file", "type": "STRING", "required": False, "default_value": None,
                 "importance": "HIGH", "documentation": "Destination filename.", "group": None,
                 "width": "NONE", "display_name": "file", "dependents": [], "order": -1}]

    async def validate_connector_config(self, plugin: str | None, config: dict[str, str]) -> dict[str, Any]:
        self.calls.append(("validate", plugin, dict(config)))
        errors = [] if "topics" in config else ["Must configure one of topics or topics.regex"]
        return {"name": SINK, "error_count": len(errors), "groups": ["Common"],
                "configs": [{"definition": {"name": "topics"},
                             "value": {"name": "topics", "value": config.get("topics"), "recommended_values": [],
                                       "errors": errors, "visible": True}}]}


def make_server(herder: FakeHerder, **kwargs: Any) -> ConnectRestServer:
    return ConnectRestServer(herder, ["http://127.0.0.1:0"], None, "3.9.0", "84ae7f3d6f8b6e5c", **kwargs)


@contextlib.asynccontextmanager
async def client_for(herder: FakeHerder, **kwargs: Any) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(make_server(herder, **kwargs).app)) as client:
        yield client


Scenario = Callable[[TestClient, FakeHerder], Awaitable[None]]


def http_test(scenario: Scenario) -> Callable[[], None]:
    """A plain test running `scenario(client, herder)` against a fresh server and herder."""
    def test() -> None:
        async def main() -> None:
            herder = FakeHerder()
            async with client_for(herder) as client:
                await scenario(client, herder)
        asyncio.run(main())
    test.__name__ = scenario.__name__
    test.__doc__ = scenario.__doc__
    return test


async def answer(response: aiohttp.ClientResponse) -> tuple[int, Any]:
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    text = await response.text()
    return response.status, json.loads(text) if text else None


async def create(client: TestClient, name: str = "hdfs-sink-connector",
                 config: dict[str, str] | None = None) -> None:
    r = await client.post("/connectors", json={"name": name, "config": dict(config or HDFS_CONFIG)})
    assert r.status == 201, await r.text()


@http_test
async def test_root_and_health(client: TestClient, herder: FakeHerder) -> None:
    assert await answer(await client.get("/")) == (
        200, {"version": "3.9.0", "commit": "84ae7f3d6f8b6e5c", "kafka_cluster_id": "kUc4_nzBQ5mZkVnFW1Hrng"})
    assert await answer(await client.get("/health")) == (
        200, {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."})
    herder.fail_with = RuntimeError("herder thread died")
    assert await answer(await client.get("/health")) == (500, {"status": "unhealthy", "message": (
        "Worker was unable to handle a request in time and may be unable to handle others: "
        "RuntimeError: herder thread died")})


@http_test
async def test_create_get_and_list(client: TestClient, herder: FakeHerder) -> None:
    assert await answer(await client.get("/connectors")) == (200, [])
    r = await client.post("/connectors", json={"name": "hdfs-sink-connector", "config": HDFS_CONFIG})
    info = {"name": "hdfs-sink-connector", "config": {**HDFS_CONFIG, "name": "hdfs-sink-connector"},
            "tasks": [{"connector": "hdfs-sink-connector", "task": 0},
                      {"connector": "hdfs-sink-connector", "task": 1}],
            "type": "sink"}
    assert await answer(r) == (201, info)
    assert r.headers["Location"] == str(client.make_url("/connectors/hdfs-sink-connector"))
    assert herder.calls[-1] == ("put", "hdfs-sink-connector", False, None)
    assert await answer(await client.get("/connectors")) == (200, ["hdfs-sink-connector"])
    assert await answer(await client.get("/connectors/")) == (200, ["hdfs-sink-connector"])
    assert await answer(await client.get("/connectors/hdfs-sink-connector")) == (200, info)
    assert await answer(await client.get("/connectors/hdfs-sink-connector/config")) == (200, info["config"])
    # the same name again: the herder's 409
    r = await client.post("/connectors", json={"name": "hdfs-sink-connector", "config": HDFS_CONFIG})
    assert await answer(r) == (409, {"error_code": 409, "message": "Connector hdfs-sink-connector already exists"})


@http_test
async def test_create_trims_the_name_and_takes_an_initial_state(client: TestClient, herder: FakeHerder) -> None:
    r = await client.post("/connectors", json={"name": "  s1 ", "config": {"connector.class": SOURCE, "tasks.max": 1},
                                               "initial_state": "stopped"})
    status, body = await answer(r)
    assert (status, body["name"], body["config"]["name"], body["config"]["tasks.max"]) == (201, "s1", "s1", "1")
    assert herder.calls[-1] == ("put", "s1", False, "STOPPED")
    assert herder.target_states["s1"] == "STOPPED"


@pytest.mark.parametrize("body, message", [
    ({"config": HDFS_CONFIG}, 'Connector name is missing or empty: the body needs a non-empty "name"'),
    ({"name": "  ", "config": HDFS_CONFIG}, 'Connector name is missing or empty: the body needs a non-empty "name"'),
    ({"name": "c"}, 'Request body has no "config" object'),
    ({"name": "c", "config": "x=1"}, "Connector configuration must be a JSON object, not str"),
    ({"name": "c", "config": {"topics": ["a"]}}, "The value of 'topics' must be a string, not an array"),
    ({"name": "c", "config": {**HDFS_CONFIG, "name": "other"}},
     "Connector name configuration (other) doesn't match connector name in the URL (c)"),
    ({"name": "c", "config": HDFS_CONFIG, "initial_state": "BROKEN"},
     'Invalid initial_state "BROKEN": expected one of RUNNING, PAUSED, STOPPED'),
    (["c"], "Request body must be a JSON object, not an array"),
])
def test_create_rejects_bodies_of_the_wrong_shape(body: Any, message: str) -> None:
    async def main() -> None:
        herder = FakeHerder()
        async with client_for(herder) as client:
            assert await answer(await client.post("/connectors", json=body)) == (
                400, {"error_code": 400, "message": message})
            assert herder.configs == {}
    asyncio.run(main())


@http_test
async def test_malformed_json_is_a_400_and_the_server_keeps_serving(client: TestClient, herder: FakeHerder) -> None:
    status, body = await answer(await client.post("/connectors", data=b'{"name": "c", "config": {',
                                                  headers={"Content-Type": "application/json"}))
    assert status == 400 and body["error_code"] == 400
    assert body["message"].startswith("Request body is not valid JSON: "), body
    status, body = await answer(await client.put("/connectors/c/config", data=b"\xff\xfe"))
    assert (status, body["error_code"]) == (400, 400)
    assert await answer(await client.put("/connectors/c/config", data=b"")) == (
        400, {"error_code": 400, "message": "Request body is empty; a JSON document is required"})
    await create(client)
    assert await answer(await client.get("/connectors")) == (200, ["hdfs-sink-connector"])


@http_test
async def test_put_config_creates_then_updates(client: TestClient, herder: FakeHerder) -> None:
    r = await client.put("/connectors/local-file-sink/config", json=HDFS_CONFIG)
    status, body = await answer(r)
    assert (status, body["name"], body["config"]["name"]) == (201, "local-file-sink", "local-file-sink")
    assert r.headers["Location"].endswith("/connectors/local-file-sink")
    r = await client.put("/connectors/local-file-sink/config", json={**HDFS_CONFIG, "tasks.max": "3"})
    status, body = await answer(r)
    assert (status, len(body["tasks"])) == (200, 3)
    assert "Location" not in r.headers
    assert herder.calls[-1] == ("put", "local-file-sink", True, None)
    assert await answer(await client.put("/connectors/local-file-sink/config",
                                         json={**HDFS_CONFIG, "name": "x"})) == (
        400, {"error_code": 400,
              "message": "Connector name configuration (x) doesn't match connector name in the URL (local-file-sink)"})
    # the herder's own validation error passes through
    status, body = await answer(await client.put("/connectors/bad/config", json={"topics": "t"}))
    assert (status, body["error_code"]) == (400, 400) and "contains no connector type" in body["message"]


@http_test
async def test_patch_config(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    status, body = await answer(await client.patch("/connectors/hdfs-sink-connector/config",
                                                   json={"file": None, "topics": "other", "batch.size": 10}))
    assert status == 200
    assert body["config"] == {"connector.class": SINK, "tasks.max": "2", "topics": "other",
                              "name": "hdfs-sink-connector", "batch.size": "10"}
    assert (await answer(await client.patch("/connectors/nope/config", json={"a": "b"})))[0] == 404


@http_test
async def test_unknown_connector_is_404_on_every_route(client: TestClient, herder: FakeHerder) -> None:
    routes = [("GET", ""), ("DELETE", ""), ("GET", "/config"), ("GET", "/status"), ("GET", "/tasks"),
              ("GET", "/tasks/0/status"), ("POST", "/tasks/0/restart"), ("POST", "/restart"),
              ("PUT", "/pause"), ("PUT", "/resume"), ("PUT", "/stop"), ("GET", "/topics"),
              ("PUT", "/topics/reset"), ("GET", "/offsets"), ("DELETE", "/offsets")]
    for method, suffix in routes:
        r = await client.request(method, "/connectors/missing" + suffix)
        assert await answer(r) == (404, {"error_code": 404, "message": "Connector missing not found"}), (method, suffix)


@http_test
async def test_status_tasks_and_task_status(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    herder.failed_tasks["hdfs-sink-connector"] = {1}
    running = {"id": 0, "state": "RUNNING", "worker_id": WORKER}
    failed = {"id": 1, "state": "FAILED", "worker_id": WORKER,
              "trace": "org.apache.kafka.common.errors.RecordTooLargeException\n"}
    assert await answer(await client.get("/connectors/hdfs-sink-connector/status")) == (200, {
        "name": "hdfs-sink-connector", "connector": {"state": "RUNNING", "worker_id": WORKER},
        "tasks": [running, failed], "type": "sink"})
    assert await answer(await client.get("/connectors/hdfs-sink-connector/tasks/1/status")) == (200, failed)
    assert await answer(await client.get("/connectors/hdfs-sink-connector/tasks/7/status")) == (
        404, {"error_code": 404, "message": "No status found for task hdfs-sink-connector-7"})
    # a task id that is not a number matches no route
    assert (await answer(await client.get("/connectors/hdfs-sink-connector/tasks/x/status")))[0] == 404
    status, tasks = await answer(await client.get("/connectors/hdfs-sink-connector/tasks"))
    assert status == 200
    assert tasks[1] == {"id": {"connector": "hdfs-sink-connector", "task": 1},
                        "config": {"task.class": SINK + "Task", "topics": "test-topic"}}


@http_test
async def test_list_with_expand(client: TestClient, herder: FakeHerder) -> None:
    await create(client, "a")
    await create(client, "b", {"connector.class": SOURCE, "tasks.max": "1"})
    status, body = await answer(await client.get("/connectors?expand=status&expand=info"))
    assert status == 200 and sorted(body) == ["a", "b"]
    assert body["b"]["info"] == {"name": "b", "config": {"connector.class": SOURCE, "tasks.max": "1", "name": "b"},
                                 "tasks": [{"connector": "b", "task": 0}], "type": "source"}
    assert body["b"]["status"]["connector"] == {"state": "RUNNING", "worker_id": WORKER}
    status, body = await answer(await client.get("/connectors?expand=status"))
    assert set(body["a"]) == {"status"}
    status, body = await answer(await client.get("/connectors?expand=bogus"))
    assert body == {"a": {}, "b": {}}


@http_test
async def test_restart_variants(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    herder.failed_tasks["hdfs-sink-connector"] = {1}
    r = await client.post("/connectors/hdfs-sink-connector/restart")
    assert (r.status, await r.read()) == (204, b"")
    assert herder.calls[-1] == ("restart", "hdfs-sink-connector", False, False)
    status, body = await answer(await client.post("/connectors/hdfs-sink-connector/restart"
                                                  "?includeTasks=true&onlyFailed=true"))
    assert status == 202
    assert herder.calls[-1] == ("restart", "hdfs-sink-connector", True, True)
    assert [t["state"] for t in body["tasks"]] == ["RUNNING", "RESTARTING"]
    status, body = await answer(await client.post("/connectors/hdfs-sink-connector/restart?includeTasks=TRUE"))
    assert status == 202 and body["connector"]["state"] == "RESTARTING"
    assert herder.calls[-1] == ("restart", "hdfs-sink-connector", True, False)
    r = await client.post("/connectors/hdfs-sink-connector/tasks/1/restart")
    assert r.status == 204 and herder.failed_tasks["hdfs-sink-connector"] == set()


@http_test
async def test_pause_resume_stop_delete(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    r = await client.put("/connectors/hdfs-sink-connector/pause")
    assert (r.status, r.headers["Content-Type"], herder.target_states["hdfs-sink-connector"]) == (
        202, "application/json", "PAUSED")
    r = await client.put("/connectors/hdfs-sink-connector/resume")
    assert (r.status, herder.target_states["hdfs-sink-connector"]) == (202, "STARTED")
    r = await client.put("/connectors/hdfs-sink-connector/stop")
    assert (r.status, herder.target_states["hdfs-sink-connector"]) == (204, "STOPPED")
    r = await client.delete("/connectors/hdfs-sink-connector")
    assert (r.status, await r.read(), herder.configs) == (204, b"", {})


@http_test
async def test_topics(client: TestClient, herder: FakeHerder) -> None:
    await create(client, "some-source", {"connector.class": SOURCE})
    herder.topics["some-source"] = ["foo", "bar"]
    assert await answer(await client.get("/connectors/some-source/topics")) == (
        200, {"some-source": {"topics": ["foo", "bar"]}})
    r = await client.put("/connectors/some-source/topics/reset")
    assert r.status == 202
    assert await answer(await client.get("/connectors/some-source/topics")) == (200, {"some-source": {"topics": []}})


@http_test
async def test_offsets(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    offsets = [{"partition": {"kafka_topic": "test", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
               {"partition": {"kafka_topic": "test", "kafka_partition": 1}, "offset": None}]
    assert await answer(await client.get("/connectors/hdfs-sink-connector/offsets")) == (200, {"offsets": []})
    status, body = await answer(await client.patch("/connectors/hdfs-sink-connector/offsets", json={"offsets": offsets}))
    assert (status, body["error_code"]) == (400, 400) and "STOPPED" in body["message"]
    await client.put("/connectors/hdfs-sink-connector/stop")
    assert await answer(await client.patch("/connectors/hdfs-sink-connector/offsets", json={"offsets": offsets})) == (
        200, {"message": "The offsets for this connector have been altered successfully"})
    assert await answer(await client.get("/connectors/hdfs-sink-connector/offsets")) == (200, {"offsets": offsets})
    assert await answer(await client.delete("/connectors/hdfs-sink-connector/offsets")) == (
        200, {"message": "The offsets for this connector have been reset successfully"})
    bad_bodies: list[Any] = [{}, {"offsets": []}, {"offsets": [{"offset": {}}]},
                             {"offsets": [{"partition": {}, "offset": 3}]}, {"offsets": {"a": 1}}, ["x"]]
    for bad in bad_bodies:
        status, body = await answer(await client.patch("/connectors/hdfs-sink-connector/offsets", json=bad))
        assert (status, body["error_code"]) == (400, 400), bad
    assert (await answer(await client.patch("/connectors/hdfs-sink-connector/offsets", json={})))[1]["message"] == (
        "Partitions / offsets need to be provided for an alter offsets request")


@http_test
async def test_connector_plugins(client: TestClient, herder: FakeHerder) -> None:
    assert await answer(await client.get("/connector-plugins")) == (200, PLUGINS[:2])
    assert await answer(await client.get("/connector-plugins?connectorsOnly=true")) == (200, PLUGINS[:2])
    assert await answer(await client.get("/connector-plugins/?connectorsOnly=false")) == (200, PLUGINS)
    status, body = await answer(await client.get("/connector-plugins/FileStreamSink/config"))
    assert status == 200 and body[0]["name"] == "file"
    assert await answer(await client.get("/connector-plugins/Nope/config")) == (
        404, {"error_code": 404, "message": "Unknown plugin Nope."})


@http_test
async def test_validate(client: TestClient, herder: FakeHerder) -> None:
    status, body = await answer(await client.put("/connector-plugins/FileStreamSinkConnector/config/validate",
                                                 json={"connector.class": SINK, "tasks.max": 1}))
    assert (status, body["error_count"]) == (200, 1)     # a config with errors is still a 200
    assert herder.calls[-1] == ("validate", "FileStreamSinkConnector", {"connector.class": SINK, "tasks.max": "1"})
    status, body = await answer(await client.put("/connector-plugins/FileStreamSink/config/validate",
                                                 json={"connector.class": SINK, "topics": "t"}))
    assert (status, body["error_count"]) == (200, 0)
    assert await answer(await client.put("/connector-plugins/FileStreamSource/config/validate",
                                         json={"connector.class": SINK})) == (
        400, {"error_code": 400, "message": f"Included connector type {SINK} does not match request type FileStreamSource"})


@http_test
async def test_unknown_path_and_wrong_method(client: TestClient, herder: FakeHerder) -> None:
    assert await answer(await client.get("/nothing/here")) == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    r = await client.delete("/connectors")
    assert await answer(r) == (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
    assert "POST" in r.headers["Allow"]


@http_test
async def test_body_over_10_mib_is_413(client: TestClient, herder: FakeHerder) -> None:
    big = json.dumps({"name": "c", "config": {"x": "y" * (10 * 1024 * 1024)}}).encode()
    status, body = await answer(await client.post("/connectors", data=big, headers={"Content-Type": "application/json"}))
    assert (status, body["error_code"]) == (413, 413) and "10485760" in body["message"]
    assert herder.configs == {}
    assert await answer(await client.get("/connectors")) == (200, [])


@http_test
async def test_unexpected_exception_is_a_500_with_its_message(client: TestClient, herder: FakeHerder) -> None:
    herder.fail_with = RuntimeError("disk on fire")
    assert await answer(await client.get("/connectors")) == (500, {"error_code": 500, "message": "disk on fire"})
    herder.fail_with = None
    assert await answer(await client.get("/connectors")) == (200, [])


def test_a_request_past_the_timeout_is_a_500() -> None:
    async def main() -> None:
        herder = FakeHerder()
        async with client_for(herder, request_timeout=0.05) as client:
            await create(client)
            herder.delay = 1.0
            assert await answer(await client.get("/connectors/hdfs-sink-connector")) == (
                500, {"error_code": 500, "message": "Request timed out"})
    asyncio.run(main())


@http_test
async def test_loggers(client: TestClient, herder: FakeHerder) -> None:
    parent, child = logging.getLogger("strom.resttest"), logging.getLogger("strom.resttest.child")
    try:
        parent.setLevel(logging.WARNING)
        child.setLevel(logging.ERROR)
        assert await answer(await client.get("/admin/loggers/strom.resttest")) == (200, {"level": "WARN"})
        r = await client.put("/admin/loggers/strom.resttest", json={"level": "debug"})
        assert await answer(r) == (200, ["strom.resttest", "strom.resttest.child"])
        assert (parent.level, child.level) == (logging.DEBUG, logging.DEBUG)
        assert await answer(await client.get("/admin/loggers/strom.resttest.child")) == (200, {"level": "DEBUG"})
        status, body = await answer(await client.get("/admin/loggers"))
        assert status == 200 and body["strom.resttest"] == {"level": "DEBUG"} and "root" in body
        await client.put("/admin/loggers/strom.resttest", json={"level": "TRACE"})
        assert await answer(await client.get("/admin/loggers/strom.resttest")) == (200, {"level": "TRACE"})
        assert await answer(await client.get("/admin/loggers/strom.never.made")) == (
            404, {"error_code": 404, "message": "Logger strom.never.made not found."})
        assert await answer(await client.put("/admin/loggers/strom.resttest", json={})) == (
            400, {"error_code": 400, "message": "Desired 'level' parameter was not specified in request."})
        assert await answer(await client.put("/admin/loggers/strom.resttest", json={"level": "LOUD"})) == (
            404, {"error_code": 404, "message": "invalid log level 'LOUD'."})
    finally:
        parent.setLevel(logging.NOTSET)
        child.setLevel(logging.NOTSET)


def test_parse_listener() -> None:
    assert parse_listener("http://:8083") == ("0.0.0.0", 8083)
    assert parse_listener("http://127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listener("HTTP://[::1]:8083/") == ("::1", 8083)
    for bad in ("https://:8443", "http://host", "localhost:8083", "http://:70000"):
        with pytest.raises(ValueError):
            parse_listener(bad)


def test_start_binds_a_free_port_and_stop_closes_it() -> None:
    async def main() -> None:
        server = make_server(FakeHerder())
        await server.start()
        try:
            assert server.port > 0
            assert server.url == f"http://127.0.0.1:{server.port}/"
            async with aiohttp.ClientSession() as session:
                async with session.get(server.url + "connectors") as r:
                    assert (r.status, await r.json()) == (200, [])
        finally:
            await server.stop()
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as session:
                await session.get(f"http://127.0.0.1:{server.port}/")
        advertised = ConnectRestServer(FakeHerder(), ["http://:0"], "http://worker-1:8083/", "v", "c")
        assert advertised.url == "http://worker-1:8083/"
    asyncio.run(main())


@contextlib.asynccontextmanager
async def started(*herders: FakeHerder) -> AsyncIterator[list[ConnectRestServer]]:
    servers = [make_server(h) for h in herders]
    try:
        for server in servers:
            await server.start()
        yield servers
    finally:
        for server in servers:
            await server.stop()


def test_forwarding_to_the_leader() -> None:
    """The follower's answer is the leader's, for a read and for a create with a body; with
    ?forward=false, or no leader known, the follower answers 409 itself."""
    async def main() -> None:
        follower, leader = FakeHerder(), FakeHerder()
        async with started(follower, leader) as (f, lead), aiohttp.ClientSession() as session:
            follower.fail_with = NotLeaderError("Cannot complete request because this worker is not the leader",
                                                lead.url)
            async with session.post(f.url + "connectors", json={"name": "c", "config": HDFS_CONFIG}) as r:
                status, body = await answer(r)
                assert (status, body["name"], body["config"]["topics"]) == (201, "c", "test-topic")
                assert r.headers["Location"].endswith("/connectors/c")
            assert list(leader.configs) == ["c"] and follower.configs == {}
            async with session.get(f.url + "connectors/c/status") as r:
                assert await answer(r) == (200, await leader.connector_status("c"))
            async with session.get(f.url + "connectors/missing") as r:
                assert await answer(r) == (404, {"error_code": 404, "message": "Connector missing not found"})
            async with session.post(f.url + "connectors/c/restart?includeTasks=true") as r:
                assert r.status == 202
            assert leader.calls[-1] == ("restart", "c", True, False)
            async with session.get(f.url + "connectors/c?forward=false") as r:
                assert await answer(r) == (409, {"error_code": 409, "message": (
                    "Cannot complete request because of a conflicting operation (e.g. worker rebalance)")})
            follower.fail_with = NotLeaderError("no leader", None)
            async with session.get(f.url + "connectors/c") as r:
                status, body = await answer(r)
                assert (status, body["error_code"]) == (409, 409) and "no known leader URL" in body["message"]
    asyncio.run(main())


def test_forwarding_stops_after_two_hops() -> None:
    """a -> b -> c reaches c; a loop a -> b -> a ends in a 409 on the third worker's refusal."""
    async def main() -> None:
        a, b, c = FakeHerder(), FakeHerder(), FakeHerder()
        async with started(a, b, c) as (sa, sb, sc), aiohttp.ClientSession() as session:
            await c.put_connector_config("x", {**HDFS_CONFIG, "name": "x"}, False)
            a.fail_with = NotLeaderError("not leader", sb.url)
            b.fail_with = NotLeaderError("not leader", sc.url)
            async with session.get(sa.url + "connectors/x/config") as r:
                assert await answer(r) == (200, {**HDFS_CONFIG, "name": "x"})
            b.fail_with = NotLeaderError("not leader", sa.url)
            async with session.get(sa.url + "connectors/x/config") as r:
                assert await answer(r) == (409, {"error_code": 409, "message": (
                    "Cannot complete request because of a conflicting operation (e.g. worker rebalance)")})
    asyncio.run(main())


def test_forwarding_to_a_leader_that_is_gone_is_a_500() -> None:
    async def main() -> None:
        follower, gone = FakeHerder(), FakeHerder()
        async with started(follower, gone) as (f, g):
            dead_url = g.url
        async with started(follower) as (f,), aiohttp.ClientSession() as session:
            follower.fail_with = NotLeaderError("not leader", dead_url)
            async with session.get(f.url + "connectors") as r:
                status, body = await answer(r)
                assert (status, body["error_code"]) == (500, 500)
                assert body["message"].startswith("IO Error trying to forward REST request: ")
    asyncio.run(main())
