"""What one broker itself says, asked over the wire with strom's sans-io client codec: the
fixtures' readiness checks ask each broker in turn ("do you know every broker, a controller,
this topic's leaders?"), which a client library that spreads its requests cannot answer.
Blocking and thread-free, so it works from any test, async ones included."""
from __future__ import annotations

import socket
from typing import Any, NamedTuple

METADATA_VERSION = 4     # controller id, and a request that never creates a topic


class BrokerView(NamedTuple):
    """One broker's Metadata answer: the brokers and controller it knows, and for each topic
    asked about (all when none were named) its partitions' leaders (-1: none); a topic the
    broker does not know is missing."""

    brokers: dict[int, int]                    # broker id -> port
    controller_id: int                         # -1 while none is known
    leaders: dict[str, dict[int, int]]         # topic -> partition -> leader id


def request(port: int, api: str, version: int, body: dict[str, Any], timeout: float = 2.0,
            host: str = "127.0.0.1") -> Any:
    """One request to the broker on host:port, on a connection of its own; the decoded
    response (OSError when the broker does not answer within `timeout`)."""
    from clients.protocol.client_codec import ClientProtocol
    codec = ClientProtocol("strom-testing")
    _, frame = codec.encode_request(api, body, version)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(frame)
        while True:
            data = s.recv(65536)
            if not data:
                raise ConnectionError(f"broker on {host}:{port} closed the connection")
            for _, response in codec.feed(data):
                return response


def broker_view(port: int, topics: list[str] | None = None, timeout: float = 2.0) -> BrokerView:
    """What the broker on `port` knows (OSError when it does not answer)."""
    md = request(port, "Metadata", METADATA_VERSION, {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False}, timeout)
    return BrokerView({b.node_id: b.port for b in md.brokers}, md.controller_id,
                      {t.name: {p.partition_index: p.leader_id for p in t.partitions}
                       for t in md.topics if t.error_code == 0})
