"""A minimal blocking Kafka wire client for tests: send one request, read one response.

Built on the sans-io codecs, so a test can speak any API at any version (or send garbage)
without a client library deciding for it.
"""
from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from clients.protocol.headers import RequestHeader, decode_response_header, encode_request_header
from clients.protocol.messages import api
from clients.protocol.schema import Struct
from clients.protocol.types import Reader, Writer


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "strom-tests", timeout: float = 10.0,
                 source_ip: str | None = None):
        # source_ip: which of this machine's addresses to send from (a client on one side of
        # a network partition, broker/testing/netns.py)
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source_ip, 0) if source_ip else None)
        self.client_id = client_id
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, api_name: str, version: int, body: Any, correlation_id: int | None = None) -> bytes:
        a = api(api_name)
        cid = next(self._ids) if correlation_id is None else correlation_id
        w = Writer()
        encode_request_header(w, RequestHeader(a.key, version, cid, self.client_id),
                              a.request_header_version(version))
        a.encode_request(body, version, w)
        payload = w.getvalue()
        return struct.pack(">i", len(payload)) + payload

    def read_frame(self) -> bytes:
        head = self._read_exactly(4)
        (size,) = struct.unpack(">i", head)
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def request(self, api_name: str, version: int, body: Any) -> Struct:
        a = api(api_name)
        self.send_raw(self.encode(api_name, version, body))
        frame = self.read_frame()
        r = Reader(frame)
        decode_response_header(r, a.response_header_version(version))
        return a.decode_response(r, version)
