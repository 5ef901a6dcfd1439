"""HTTP basic authentication passed through to the broker as SASL PLAIN: the broker's ACLs
apply to the HTTP user. A broker with only a SASL_PLAINTEXT listener, Kafka's ACL
authorizer (super user admin) and PLAIN users alice and bob; a proxy with
`authentication.method=BASIC`. alice may describe and write one topic, bob nothing."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from tests.support.broker_process import BrokerProcess
from tests.support.rest_proxy import RestProxyProcess
from tests.support.security import USERS, sasl_plain_overrides

OVERRIDES = sasl_plain_overrides(acls=True)
TOPIC, OTHER = "alice-only", "admins-only"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestProxyProcess]:
    base = tmp_path_factory.mktemp("rest-auth")
    broker = BrokerProcess(base / "broker", overrides=OVERRIDES).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "PLAIN", "sasl.username": "admin", "sasl.password": USERS["admin"]})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(OTHER, 1, 1)]).values():
        f.result(30)
    grants = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*", op,
                         AclPermissionType.ALLOW) for op in (AclOperation.DESCRIBE, AclOperation.WRITE,
                                                             AclOperation.DESCRIBE_CONFIGS)]
    for f in admin.create_acls(grants).values():
        f.result(30)
    proxy = RestProxyProcess(base / "proxy", broker.bootstrap,
                             {"authentication.method": "BASIC", "client.security.protocol": "SASL_PLAINTEXT"})
    try:
        proxy.start()
        yield proxy
    finally:
        proxy.stop()
        del admin
        broker.stop()


def call(proxy: RestProxyProcess, method: str, path: str, user: str | None = None,
         password: str | None = None, body: Any = None) -> tuple[int, dict[str, str], Any]:
    headers = {"Content-Type": "application/json"}
    if user is not None:
        secret = USERS[user] if password is None else password
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(proxy.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"null")


def _topics(proxy: RestProxyProcess, cluster: str, user: str) -> set[str]:
    status, _, body = call(proxy, "GET", f"/v3/clusters/{cluster}/topics", user)
    assert status == 200, body
    return {t["topic_name"] for t in body["data"]}


def test_without_credentials_401_with_a_challenge(secured: RestProxyProcess) -> None:
    status, headers, body = call(secured, "GET", "/v3/clusters")
    assert (status, body["error_code"]) == (401, 401)
    assert headers["WWW-Authenticate"] == 'Basic realm="KafkaRest"'


def test_credentials_the_broker_refuses_are_40101(secured: RestProxyProcess) -> None:
    status, _, body = call(secured, "GET", "/v3/clusters", "alice", "wrong-password")
    assert (status, body["error_code"]) == (401, 40101), body
    assert call(secured, "GET", "/v3/clusters", "alice")[0] == 200      # the right one still works


def test_acls_apply_per_http_user(secured: RestProxyProcess) -> None:
    status, _, body = call(secured, "GET", "/v3/clusters", "alice")
    assert status == 200, body
    cluster = body["data"][0]["cluster_id"]
    assert TOPIC in _topics(secured, cluster, "alice")
    assert OTHER not in _topics(secured, cluster, "alice")
    assert TOPIC not in _topics(secured, cluster, "bob")
    assert {TOPIC, OTHER} <= _topics(secured, cluster, "admin")

    record = {"value": {"type": "STRING", "data": "from alice"}}
    status, _, body = call(secured, "POST", f"/v3/clusters/{cluster}/topics/{TOPIC}/records", "alice", body=record)
    assert (status, body["error_code"]) == (200, 200), body
    status, _, body = call(secured, "POST", f"/v3/clusters/{cluster}/topics/{TOPIC}/records", "bob", body=record)
    assert (status, body["error_code"]) == (403, 40301), body
    # v2 as well: bob may not see the topic's metadata, alice may.
    status, _, body = call(secured, "GET", f"/topics/{TOPIC}", "bob")
    assert (status, body["error_code"]) == (403, 40301), body
    status, _, body = call(secured, "GET", f"/topics/{TOPIC}", "alice")
    assert (status, body["name"]) == (200, TOPIC), body
