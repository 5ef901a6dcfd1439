"""Invariant 5 on a SASL listener: what a stranger can do before authenticating, and what a
user who is not a broker can ask for after it. One broker process with a SASL_PLAINTEXT
listener (PLAIN users admin, alice, bob), Kafka's ACL authorizer, `super.users=User:admin`.

- Before SaslAuthenticate succeeds only ApiVersions, SaslHandshake and SaslAuthenticate are
  served: a frame claiming 100 MB (above `sasl.server.max.receive.size`, 512 KiB) closes the
  connection with nothing allocated (the broker's peak RSS barely moves), and so does a Produce
  or a Metadata request, while an authenticated producer keeps being served (CVE-2022-34917).
- 2000 connections that send nothing or half a SaslHandshake cost the broker a bounded amount
  of memory per connection (RSS, as tests/integration/test_bad_input.py measures it): read
  buffers start small and grow only with what a connection sends.
- A replica Fetch (replica_id >= 0) from alice, who may Read the topic but is no broker, gets
  TOPIC_AUTHORIZATION_FAILED and no records, while the same Fetch as a consumer
  (replica_id = -1) returns them (CVE-2018-1288); the super user's replica Fetch is not refused.
"""
from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from clients.aio.connection import BrokerConnection
from clients.aio.security import ClientSecurity
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch, records_from_fetch
from tests.chaos.checker import ChaosProducer, Checker, read_back
from tests.support.broker_process import BrokerProcess
from tests.support.security import USERS, SecurityKit, secure_overrides
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MiB = 2**20
# "{port}" is the broker's own port (BrokerProcess); secure_overrides' hint says int only.
LISTENERS: dict[str, Any] = {"SASL_PLAINTEXT": "{port}"}
OVERSIZED = 100 * 2**20          # a frame size claimed before authentication
OVERSIZED_CONNECTIONS = 20
# 20 frames of 100 MB allocated would raise the peak by 2000 MiB; even one by 100 MiB.
OVERSIZED_PEAK_BOUND = 16 * MiB
FLOOD = 2000
# What one idle unauthenticated connection may cost: its transport, protocol and bookkeeping
# objects (measured: about 8 KiB with a 4 KiB receive buffer). A receive buffer of the usual
# sizes (64 KiB and up) allocated per connection before it authenticates would cost
# 2000 x 64 KiB = 125 MiB and more: what an unauthenticated flood must not make a broker hold.
FLOOD_BYTES_PER_CONNECTION = 32 * 1024
REPLICA_TOPIC = "replica-fetch"
BYSTANDER_TOPIC = "bystander"


def sasl(user: str) -> dict[str, str]:
    """SASL_PLAINTEXT + PLAIN as `user`, in keys librdkafka and strom's clients both read."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("security-bad-input")
    overrides = secure_overrides(SecurityKit(workdir / "tls"), LISTENERS, mechanisms="PLAIN", acls=True)
    b = BrokerProcess(workdir / "b0", overrides=overrides).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def admin(secured: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": secured.bootstrap, **sasl("admin"), "log_level": 0})


def proc_status(broker: BrokerProcess, field: str) -> int:
    """A memory field of /proc/<pid>/status (VmRSS, VmHWM) in bytes."""
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak_rss(broker: BrokerProcess) -> None:
    """Start VmHWM (the peak RSS) again from the current RSS (proc(5): clear_refs "5")."""
    assert broker.proc is not None
    Path(f"/proc/{broker.proc.pid}/clear_refs").write_text("5")


def open_fds(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def wait_until(cond: Callable[[], bool], message: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{message}: not within {timeout}s")
        time.sleep(0.05)


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=5)


def closed_by_broker(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closes the connection (EOF or reset) without answering."""
    sock.settimeout(timeout)
    try:
        return sock.recv(4) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def produce_frame(w: WireClient, topic: str) -> bytes:
    return w.encode("Produce", 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": build_batch([Record(None, b"x")])}]}]})


def bystander(broker: BrokerProcess, checker: Checker) -> ChaosProducer:
    """An authenticated producer (the super user) writing all along, 500 records/s."""
    return ChaosProducer(broker.bootstrap, BYSTANDER_TOPIC, checker, name="bystander", rate=500, keys=None,
                         config={**sasl("admin"), "log_level": 0, "allow.auto.create.topics": True})


def test_unauthenticated_oversized_frames_and_requests_close_the_connection(
        secured: BrokerProcess, admin: AdminClient) -> None:
    admin.create_topics([NewTopic(BYSTANDER_TOPIC, 1, 1)])[BYSTANDER_TOPIC].result(30)
    checker = Checker()
    with bystander(secured, checker) as producer:
        producer.wait_acked(200, timeout=30)
        rss_before = proc_status(secured, "VmRSS")
        reset_peak_rss(secured)

        # Frames claiming 100 MB: a SaslHandshake header follows, as if the body were coming.
        socks = [connect(secured) for _ in range(OVERSIZED_CONNECTIONS)]
        for s in socks:
            s.sendall(struct.pack(">i", OVERSIZED) + b"\x00\x11\x00\x01" + b"\x00" * 4096)
        assert all(closed_by_broker(s) for s in socks)
        for s in socks:
            s.close()
        # The same after a successful SaslHandshake, before SaslAuthenticate.
        with WireClient("127.0.0.1", secured.port) as w:
            assert w.request("SaslHandshake", 1, {"mechanism": "PLAIN"}).error_code == 0
            w.send_raw(struct.pack(">i", OVERSIZED) + b"\x00\x24\x00\x02" + b"\x00" * 4096)
            assert closed_by_broker(w.sock)
        peak_growth = proc_status(secured, "VmHWM") - rss_before

        # Requests other than ApiVersions / SaslHandshake / SaslAuthenticate before authenticating.
        with WireClient("127.0.0.1", secured.port) as w:
            w.send_raw(produce_frame(w, BYSTANDER_TOPIC))
            assert closed_by_broker(w.sock), "a Produce before SaslHandshake was answered"
        with WireClient("127.0.0.1", secured.port) as w:
            assert w.request("ApiVersions", 3, {"client_software_name": "t",
                                                "client_software_version": "1"}).error_code == 0
            assert w.request("SaslHandshake", 1, {"mechanism": "PLAIN"}).error_code == 0
            w.send_raw(produce_frame(w, BYSTANDER_TOPIC))
            assert closed_by_broker(w.sock), "a Produce between SaslHandshake and SaslAuthenticate was answered"
        with WireClient("127.0.0.1", secured.port) as w:
            w.send_raw(w.encode("Metadata", 1, {"topics": None}))
            assert closed_by_broker(w.sock), "a Metadata before authentication was answered"

        acked = producer.acked
        producer.wait_acked(acked + 200, timeout=30)      # still served meanwhile
    read_back(secured.bootstrap, BYSTANDER_TOPIC, 1, checker, config={**sasl("admin"), "log_level": 0})
    report = checker.report()
    print(f"{OVERSIZED_CONNECTIONS + 1} frames claiming {OVERSIZED // MiB} MB before authentication: "
          f"peak RSS +{peak_growth / MiB:.1f} MiB (bound {OVERSIZED_PEAK_BOUND // MiB} MiB); "
          f"bystander: {report}")
    assert producer.errors == {}, producer.errors
    report.assert_ok(min_acked=400)
    assert secured.proc is not None and secured.proc.poll() is None, "broker died"
    assert peak_growth < OVERSIZED_PEAK_BOUND, peak_growth


def test_a_flood_of_unauthenticated_connections_leaves_memory_bounded(secured: BrokerProcess) -> None:
    rss_before = secured.rss_bytes()
    with WireClient("127.0.0.1", secured.port) as w:
        handshake = w.encode("SaslHandshake", 1, {"mechanism": "PLAIN"})
    socks: list[socket.socket] = []
    try:
        for i in range(FLOOD):
            s = connect(secured)
            if i % 2:
                s.sendall(handshake[:len(handshake) // 2])    # the size, and half of what it announces
            socks.append(s)
        wait_until(lambda: open_fds(secured) >= FLOOD, "the broker accepting every connection")
        time.sleep(0.5)         # let the half handshakes be read
        rss_flood = secured.rss_bytes()

        # An authenticated client is served in the middle of the flood.
        async def metadata_as_alice() -> int:
            conn = await BrokerConnection.connect("127.0.0.1", secured.port,
                                                  security=ClientSecurity.from_config(sasl("alice")))
            try:
                return int((await conn.request("Metadata", {"topics": []}, version=1)).brokers[0].node_id)
            finally:
                await conn.close()

        assert asyncio.run(metadata_as_alice()) == 0
        still_open = sum(1 for s in socks if not closed_by_broker(s, timeout=0.001))
    finally:
        for s in socks:
            s.close()
    growth = rss_flood - rss_before
    bound = FLOOD * FLOOD_BYTES_PER_CONNECTION
    print(f"{FLOOD} unauthenticated connections (half silent, half with half a SaslHandshake): "
          f"RSS {rss_before / MiB:.0f} -> {rss_flood / MiB:.0f} MiB, +{growth / MiB:.1f} MiB = "
          f"{growth / FLOOD / 1024:.1f} KiB per connection (bound {bound / MiB:.1f} MiB = "
          f"{FLOOD_BYTES_PER_CONNECTION // 1024} KiB each); {still_open} still open")
    assert secured.proc is not None and secured.proc.poll() is None, "broker died"
    assert growth < bound, f"{growth / MiB:.1f} MiB for {FLOOD} unauthenticated connections"


# ---- a replica Fetch from a user who is no broker ------------------------------------------


def fetch_body(version: int, replica_id: int, topic: str, topic_id: Any) -> dict[str, Any]:
    """Fetch of partition 0 from offset 0: by name up to v12, by topic id from v13; the
    replica id in `replica_id` up to v14, in `replica_state` from v15."""
    body: dict[str, Any] = {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                            "topics": [{("topic" if version <= 12 else "topic_id"): (topic if version <= 12
                                                                                   else topic_id),
                                        "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}]}
    if version >= 15:
        body["replica_state"] = {"replica_id": replica_id, "replica_epoch": -1}
    else:
        body["replica_id"] = replica_id
    return body


async def fetch_as(broker: BrokerProcess, user: str, version: int, replica_id: int) -> tuple[int, int]:
    """(error code, records) of partition 0 of REPLICA_TOPIC, fetched as `user`."""
    conn = await BrokerConnection.connect("127.0.0.1", broker.port, security=ClientSecurity.from_config(sasl(user)))
    try:
        md = await conn.request("Metadata", {"topics": [{"name": REPLICA_TOPIC}], "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False}, version=12)
        topic_id = md.topics[0].topic_id
        answer = await conn.request("Fetch", fetch_body(version, replica_id, REPLICA_TOPIC, topic_id),
                                    version=version)
        partitions = [p for t in answer.responses for p in t.partitions]
        assert len(partitions) == 1, answer
        p = partitions[0]
        return int(p.error_code), sum(1 for _ in records_from_fetch(bytes(p.records or b"")))
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def replica_topic(secured: BrokerProcess, admin: AdminClient) -> str:
    """REPLICA_TOPIC with 3 records, which alice may Read (and so Describe)."""
    admin.create_topics([NewTopic(REPLICA_TOPIC, 1, 1)])[REPLICA_TOPIC].result(30)

    async def produce() -> None:
        conn = await BrokerConnection.connect("127.0.0.1", secured.port,
                                              security=ClientSecurity.from_config(sasl("admin")))
        try:
            batch = build_batch([Record(None, b"secret-%d" % i) for i in range(3)])
            answer = await conn.request("Produce", {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": REPLICA_TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
            assert answer.responses[0].partition_responses[0].error_code == 0, answer
        finally:
            await conn.close()

    asyncio.run(produce())
    read = AclBinding(ResourceType.TOPIC, REPLICA_TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    for f in admin.create_acls([read], request_timeout=15).values():
        f.result(30)
    wait_until(lambda: asyncio.run(fetch_as(secured, "alice", 12, -1)) == (Code.NONE, 3),
               "alice's Read ACL in force", timeout=10)
    return REPLICA_TOPIC


@pytest.mark.parametrize("version", [4, 12, 16])
def test_a_replica_fetch_from_a_user_who_is_no_broker_is_refused(secured: BrokerProcess, replica_topic: str,
                                                                   version: int) -> None:
    as_consumer = asyncio.run(fetch_as(secured, "alice", version, -1))
    as_follower = asyncio.run(fetch_as(secured, "alice", version, 1))
    super_user = asyncio.run(fetch_as(secured, "admin", version, 1))
    print(f"Fetch v{version} as alice: replica_id -1 -> (error, records) {as_consumer}, replica_id 1 -> "
          f"{as_follower}; as the super user, replica_id 1 -> {super_user}")
    assert as_consumer == (Code.NONE, 3)
    assert as_follower == (Code.TOPIC_AUTHORIZATION_FAILED, 0)
    assert super_user[0] != Code.TOPIC_AUTHORIZATION_FAILED
