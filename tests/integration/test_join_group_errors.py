"""JoinGroup errors reach clients of every version: before v7 the protocol name may not be
null, so an error answer carries "" there (a null one could not be encoded, and the client
saw its connection closed instead of the error)."""
from __future__ import annotations

import time

import pytest

from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("version", [0, 1, 5, 6, 7, 9])
def test_an_invalid_session_timeout_is_answered_at_every_version(broker, version):
    body = {"group_id": "g", "session_timeout_ms": 1, "rebalance_timeout_ms": 1000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "reason": None,
            "protocols": [{"name": "range", "metadata": b""}]}
    deadline = time.monotonic() + 20
    with WireClient("127.0.0.1", broker.port) as c:
        while True:     # COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS while __consumer_offsets loads
            c.request("FindCoordinator", 3, {"key": "g", "key_type": 0})    # creates it
            r = c.request("JoinGroup", version, body)
            if r.error_code not in (14, 15) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert r.error_code == 26           # INVALID_SESSION_TIMEOUT
