"""max.connections.per.ip and max.connections: a connection over a limit is closed as soon as
it is accepted, and a freed slot admits the next one; connections.max.idle.ms closes a
connection that asked nothing for that long. With small read buffers (test_security_bad_input)
these bound what a flood of strangers' connections can make the broker hold."""
from __future__ import annotations

import socket
import time

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


def _closed_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _metadata(port: int) -> int:
    with WireClient("127.0.0.1", port) as w:
        return len(w.request("Metadata", 1, {"topics": []}).brokers)


def test_per_ip_limit_refuses_the_extra_connection_and_a_freed_slot_admits_again(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"max.connections.per.ip": "4"}).start()
    try:
        held = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(4)]
        extra = socket.create_connection(("127.0.0.1", b.port))
        assert _closed_within(extra, 5)
        assert not _closed_within(held[0], 0.3)        # those admitted stay
        held.pop().close()
        time.sleep(0.2)
        assert _metadata(b.port) == 1                  # the freed slot serves a client
        for s in held:
            s.close()
    finally:
        b.stop()


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(tmp_path):
    b = BrokerProcess(tmp_path, overrides={"connections.max.idle.ms": "1000"}).start()
    try:
        idle = socket.create_connection(("127.0.0.1", b.port))
        with WireClient("127.0.0.1", b.port) as busy:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 2.5:
                assert len(busy.request("Metadata", 1, {"topics": []}).brokers) == 1
                time.sleep(0.3)
            assert _closed_within(idle, 1.0)
            assert time.monotonic() - t0 < 4.0
    finally:
        b.stop()
