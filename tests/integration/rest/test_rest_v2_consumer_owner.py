"""A v2 consumer instance answers only the HTTP user who created it, when the proxy
authenticates (authentication.method=BASIC): to anyone else, and to its creator's name with
another password, every route of the instance is 404/40403, as if it did not exist, so no
one reads, seeks, commits or deletes through another user's consumer (which acts on the
broker with its creator's credentials).

A broker with only a SASL_PLAINTEXT listener and Kafka's ACL authorizer (super user admin);
alice and bob may both read the topic and use the group, so what stops bob is the proxy."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from tests.support.broker_process import BrokerProcess
from tests.support.rest_proxy import RestProxyProcess
from tests.support.security import USERS, sasl_plain_overrides

pytestmark = pytest.mark.integration

OVERRIDES = sasl_plain_overrides(acls=True)
TOPIC, GROUP = "shared-topic", "shared-group"
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
NOT_FOUND = {"error_code": 40403, "message": "Consumer instance not found."}


def admin_config(bootstrap: str) -> dict[str, str | int | float | bool]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": "admin",
            "sasl.password": USERS["admin"]}


def prepare(bootstrap: str) -> None:
    """The topic with two records; alice and bob granted the same ACLs."""
    admin = AdminClient(admin_config(bootstrap))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    grants = [AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                         AclPermissionType.ALLOW)
              for user in ("alice", "bob")
              for kind, name, op in ((ResourceType.TOPIC, TOPIC, AclOperation.READ),
                                     (ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE),
                                     (ResourceType.GROUP, GROUP, AclOperation.READ))]
    for f in admin.create_acls(grants).values():
        f.result(30)
    producer = Producer(admin_config(bootstrap))
    for value in (b"first", b"second"):
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(15) == 0


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestProxyProcess]:
    """The broker, prepared, and a BASIC-auth proxy in front of it."""
    base = tmp_path_factory.mktemp("rest-owner")
    broker = BrokerProcess(base / "broker", overrides=OVERRIDES).start()
    proxy = RestProxyProcess(base / "proxy", broker.bootstrap,
                             {"authentication.method": "BASIC",
                              "client.security.protocol": "SASL_PLAINTEXT"})
    try:
        prepare(broker.bootstrap)
        proxy.start()
        yield proxy
    finally:
        proxy.stop()
        broker.stop()


def call(proxy: RestProxyProcess, method: str, path: str, user: str | None,
         password: str | None = None, body: Any = None,
         accept: str = V2) -> tuple[int, Any]:
    """(status, JSON body) of one request as `user` (its own password unless given)."""
    headers = {"Content-Type": V2, "Accept": accept}
    if user is not None:
        secret = USERS[user] if password is None else password
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(proxy.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_only_the_creator_can_use_or_delete_an_instance(secured: RestProxyProcess) -> None:
    base = f"/consumers/{GROUP}/instances/mine"
    partitions = {"partitions": [{"topic": TOPIC, "partition": 0}]}
    status, body = call(secured, "POST", f"/consumers/{GROUP}", "alice",
                        body={"name": "mine", "auto.offset.reset": "earliest"})
    assert (status, body["instance_id"]) == (200, "mine"), body
    assert call(secured, "POST", f"{base}/assignments", "alice", body=partitions)[0] == 204
    status, body = call(secured, "GET", f"{base}/records?timeout=1000", "alice", accept=BINARY)
    assert status == 200, body
    assert [r["value"] for r in body] == [base64.b64encode(b"first").decode(),
                                          base64.b64encode(b"second").decode()]

    # bob, and alice's name with a wrong password, find no instance on any route
    attempts = [("GET", "/subscription", None, V2), ("GET", "/assignments", None, V2),
                ("GET", "/records?timeout=100", None, BINARY),
                ("POST", "/subscription", {"topics": [TOPIC]}, V2),
                ("DELETE", "/subscription", None, V2),
                ("POST", "/assignments", partitions, V2),
                ("POST", "/positions", {"offsets": [{"topic": TOPIC, "partition": 0,
                                                     "offset": 0}]}, V2),
                ("POST", "/positions/beginning", partitions, V2),
                ("POST", "/positions/end", partitions, V2),
                ("POST", "/offsets", None, V2),
                ("POST", "/offsets", {"offsets": [{"topic": TOPIC, "partition": 0,
                                                   "offset": 0}]}, V2),
                ("GET", "/offsets", partitions, V2),
                ("DELETE", "", None, V2)]
    for user, password in (("bob", None), ("alice", "not-alice-secret")):
        for method, route, payload, accept in attempts:
            assert call(secured, method, base + route, user, password, payload, accept) == (
                404, NOT_FOUND), (user, method, route)
    # without credentials: 401 before any lookup
    assert call(secured, "GET", f"{base}/assignments", None)[0] == 401
    # the name stays alice's: bob cannot create an instance of it in the group
    status, body = call(secured, "POST", f"/consumers/{GROUP}", "bob", body={"name": "mine"})
    assert (status, body["error_code"]) == (409, 40902), body

    # nothing bob tried moved, committed or closed alice's instance
    assert call(secured, "GET", f"{base}/assignments", "alice") == (200, partitions)
    assert call(secured, "GET", f"{base}/offsets", "alice", body=partitions) == (
        200, {"offsets": []})
    status, body = call(secured, "GET", f"{base}/records?timeout=200", "alice", accept=BINARY)
    assert (status, body) == (200, []), body
    # bob's own instance in the same group works for him, and only for him
    status, _ = call(secured, "POST", f"/consumers/{GROUP}", "bob", body={"name": "bobs"})
    assert status == 200
    assert call(secured, "GET", f"/consumers/{GROUP}/instances/bobs/subscription", "bob") == (
        200, {"topics": []})
    assert call(secured, "GET", f"/consumers/{GROUP}/instances/bobs/subscription", "alice") == (
        404, NOT_FOUND)
    for user, name in (("alice", "mine"), ("bob", "bobs")):
        assert call(secured, "DELETE", f"/consumers/{GROUP}/instances/{name}", user) == (
            204, None)
    assert call(secured, "GET", f"{base}/assignments", "alice") == (404, NOT_FOUND)
