"""Invariant 5: any byte sequence on a socket yields an error response or a closed
connection; the broker keeps serving everyone else and its memory stays bounded."""
from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import Producer

from clients.protocol.headers import decode_response_header
from clients.protocol.messages import api
from clients.protocol.types import Reader
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


def _closed_or_answered(sock: socket.socket, timeout: float = 5.0) -> str:
    """'closed' if the broker closes the connection, 'answered' if it sends a frame."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(4)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except socket.timeout:
        return "silent"
    return "answered" if data else "closed"


class BackgroundProducer:
    """A well-behaved client on its own connection; records every delivery error."""

    def __init__(self, bootstrap: str, topic: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
        self.topic = topic
        self.errors: list[str] = []
        self.delivered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered += 1

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, key=str(i).encode(), value=b"x" * 100,
                                  on_delivery=self._on_delivery)
            i += 1
            self.producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.01)
        self.producer.flush(30)

    def __enter__(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)


def _connect(broker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=5)


def test_malformed_frames_close_only_their_connection(broker, long_run):
    rss_before = broker.rss_bytes()
    with BackgroundProducer(broker.bootstrap, "bystander") as bystander:
        time.sleep(1.0)

        # A frame claiming 2 GiB: closed at once, nothing allocated.
        s = _connect(broker)
        s.sendall(struct.pack(">i", 2**31 - 1) + b"\x00" * 64)
        assert _closed_or_answered(s) == "closed"
        s.close()

        # A negative size.
        s = _connect(broker)
        s.sendall(struct.pack(">i", -5))
        assert _closed_or_answered(s) == "closed"
        s.close()

        # A truncated frame followed by a hang-up must not hurt anything.
        s = _connect(broker)
        s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x01")
        s.close()

        # A frame too short for a request header.
        s = _connect(broker)
        s.sendall(struct.pack(">i", 3) + b"\x00\x12\x00")
        assert _closed_or_answered(s) == "closed"
        s.close()

        # Unknown API key and unknown version of a known API: closed.
        with WireClient("127.0.0.1", broker.port) as c:
            frame = c.encode("Metadata", 1, {"topics": []})
            bad = bytearray(frame)
            struct.pack_into(">h", bad, 4, 999)
            c.send_raw(bytes(bad))
            assert _closed_or_answered(c.sock) == "closed"
        with WireClient("127.0.0.1", broker.port) as c:
            frame = bytearray(c.encode("Metadata", 1, {"topics": []}))
            struct.pack_into(">h", frame, 6, 99)
            c.send_raw(bytes(frame))
            assert _closed_or_answered(c.sock) == "closed"

        # An array count of 2^31-1 inside a small frame: Metadata v1 topics array.
        with WireClient("127.0.0.1", broker.port) as c:
            frame = bytearray(c.encode("Metadata", 1, {"topics": []}))
            struct.pack_into(">i", frame, len(frame) - 4, 2**31 - 1)
            c.send_raw(bytes(frame))
            assert _closed_or_answered(c.sock) == "closed"

        # The same inside a flexible request (compact array length as a huge uvarint).
        with WireClient("127.0.0.1", broker.port) as c:
            frame = bytearray(c.encode("Metadata", 12, {"topics": [], "allow_auto_topic_creation": False}))
            body_end = len(frame)
            # topics compact array is the first body field after the header (4 + 2+2+4 + 2+len(cid) + 1 tag byte)
            hdr = 4 + 8 + 2 + len(c.client_id.encode()) + 1
            mutated = bytes(frame[:hdr]) + b"\xff\xff\xff\xff\x07" + bytes(frame[hdr + 1:body_end])
            mutated = struct.pack(">i", len(mutated) - 4) + mutated[4:]
            c.send_raw(mutated)
            assert _closed_or_answered(c.sock) == "closed"

        # Random garbage and random mutations of valid requests.
        rng = random.Random(1234)
        rounds = 2000 if long_run else 200
        with WireClient("127.0.0.1", broker.port) as proto:
            valid = [
                proto.encode("ApiVersions", 3, {"client_software_name": "fuzz", "client_software_version": "1"}),
                proto.encode("Metadata", 9, {"topics": [{"name": "bystander"}], "allow_auto_topic_creation": False}),
                proto.encode("ListOffsets", 5, {"replica_id": -1, "topics": [
                    {"name": "bystander", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
                proto.encode("Fetch", 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1000,
                                           "topics": [{"topic": "bystander", "partitions": [
                                               {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]}),
            ]
        outcomes = {"closed": 0, "answered": 0, "silent": 0}
        for i in range(rounds):
            s = _connect(broker)
            if rng.random() < 0.3:
                payload = rng.randbytes(rng.randint(0, 300))
                s.sendall(struct.pack(">i", len(payload)) + payload)
            else:
                frame = bytearray(rng.choice(valid))
                for _ in range(rng.randint(1, 8)):
                    pos = rng.randrange(4, len(frame))
                    frame[pos] = rng.randrange(256)
                s.sendall(bytes(frame))
            outcomes[_closed_or_answered(s, timeout=2.0)] += 1
            s.close()
        # Mutated Fetch requests may legitimately long-poll (silent) until their max wait;
        # everything else must be answered or closed.
        print("fuzz outcomes:", outcomes)
        assert outcomes["answered"] > 0 and outcomes["closed"] > 0, outcomes
        assert outcomes["answered"] + outcomes["closed"] >= rounds * 0.9, outcomes

        time.sleep(0.5)
    assert bystander.errors == [], bystander.errors[:5]
    assert bystander.delivered > 100
    # Still healthy: a fresh client gets metadata.
    with WireClient("127.0.0.1", broker.port) as c:
        md = c.request("Metadata", 1, {"topics": None})
        assert any(t.name == "bystander" for t in md.topics)
    assert broker.proc.poll() is None, "broker died"
    rss_after = broker.rss_bytes()
    assert rss_after - rss_before < 200 * 2**20, (rss_before, rss_after)


def test_unknown_api_versions_version_gets_error_35_in_v0_format(broker):
    with WireClient("127.0.0.1", broker.port) as c:
        frame = bytearray(c.encode("ApiVersions", 0, {}))
        struct.pack_into(">h", frame, 6, 77)
        c.send_raw(bytes(frame))
        resp = c.read_frame()
    r = Reader(resp)
    decode_response_header(r, 0)
    body = api("ApiVersions").decode_response(r, 0)
    assert body.error_code == 35
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert keys[18] == (0, 4)
    assert 0 in keys and 1 in keys and 3 in keys


def test_pipelined_requests_answered_in_order(broker):
    with WireClient("127.0.0.1", broker.port) as c:
        frames = [c.encode("ApiVersions", 2, {}, correlation_id=i) if i % 2 else
                  c.encode("Metadata", 1, {"topics": None}, correlation_id=i) for i in range(50)]
        c.send_raw(b"".join(frames))
        for i in range(50):
            frame = c.read_frame()
            assert struct.unpack_from(">i", frame, 0)[0] == i
