"""Connect's group protocol codec: golden bytes written by hand from Kafka's schemas
(ConnectProtocol, IncrementalCooperativeConnectProtocol), round trips of every version."""
import pytest

from clients.connect.runtime.connect_protocol import (
    CONFIG_MISMATCH, ConnectAssignment, WorkerMetadata, decode_assignment, decode_metadata,
    encode_assignment, encode_metadata, protocols_for)
from clients.protocol.types import DecodeError

URL = b"http://w1:8083"

# Version 1 WorkerState: version, url, config offset, allocation (null: no assignment yet).
METADATA_V1 = (b"\x00\x01" + b"\x00\x0e" + URL + (5).to_bytes(8, "big")
               + b"\xff\xff\xff\xff")
# Version 0 has no allocation.
METADATA_V0 = b"\x00\x00" + b"\x00\x0e" + URL + (5).to_bytes(8, "big")

# Version 1 Assignment: c runs its connector (-1) and tasks 0 and 2; d's task 1 is revoked;
# the members rejoin in 250 ms.
ASSIGNMENT_V1 = (
    b"\x00\x01"                                  # version
    b"\x00\x00"                                  # error
    b"\x00\x02m1"                                # leader
    b"\x00\x01u"                                 # leader url
    b"\x00\x00\x00\x00\x00\x00\x00\x07"          # config offset
    b"\x00\x00\x00\x01"                          # assignment: 1 connector entry
    b"\x00\x01c"
    b"\x00\x00\x00\x03\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x02"
    b"\x00\x00\x00\x01"                          # revoked: 1 connector entry
    b"\x00\x01d"
    b"\x00\x00\x00\x01\x00\x00\x00\x01"
    b"\x00\x00\x00\xfa")                         # delay 250


def assignment(version=1, **kw):
    base = dict(error=0, leader="m1", leader_url="u", config_offset=7, connectors=["c"],
                tasks=[("c", 0), ("c", 2)], revoked_connectors=[], revoked_tasks=[("d", 1)],
                delay_ms=250, version=version)
    base.update(kw)
    return ConnectAssignment(**base)


def test_golden_worker_metadata():
    m = WorkerMetadata("http://w1:8083", 5, None, 1)
    assert encode_metadata(m) == METADATA_V1
    assert decode_metadata(METADATA_V1) == m
    assert encode_metadata(WorkerMetadata("http://w1:8083", 5, None, 0)) == METADATA_V0
    assert decode_metadata(METADATA_V0) == WorkerMetadata("http://w1:8083", 5, None, 0)


def test_golden_assignment():
    assert encode_assignment(assignment()) == ASSIGNMENT_V1
    assert decode_assignment(ASSIGNMENT_V1) == assignment()


def test_assignment_v0_has_no_revocations_nor_delay():
    a = assignment(version=0, revoked_tasks=[], delay_ms=0)
    data = encode_assignment(a)
    # v1's layout minus the revoked array (4 + 3 + 8 bytes) and the delay (4).
    assert data == b"\x00\x00" + ASSIGNMENT_V1[2:-19]
    assert decode_assignment(data) == a


def test_null_arrays_of_v1_are_empty():
    data = ASSIGNMENT_V1[:2 + 2 + 4 + 3 + 8] + b"\xff\xff\xff\xff" * 2 + b"\x00\x00\x00\x00"
    a = decode_assignment(data)
    assert (a.connectors, a.tasks, a.revoked_connectors, a.revoked_tasks) == ([], [], [], [])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_round_trips(version):
    a = assignment(version=version, error=CONFIG_MISMATCH, connectors=["a", "b"],
                   tasks=[("a", 0), ("b", 3)], revoked_connectors=["z"] if version else [],
                   revoked_tasks=[("z", 0)] if version else [], delay_ms=9 if version else 0)
    assert decode_assignment(encode_assignment(a)) == a
    m = WorkerMetadata("http://x:1", 42, a if version else None, version)
    back = decode_metadata(encode_metadata(m))
    assert back == WorkerMetadata("http://x:1", 42, a if version else None, version)


def test_the_allocation_is_embedded_with_the_metadata_version():
    # A worker's allocation is its assignment encoded with the protocol's header version.
    m = WorkerMetadata("u", 3, assignment(version=1), 2)
    data = encode_metadata(m)
    assert data[-len(ASSIGNMENT_V1):] == b"\x00\x02" + ASSIGNMENT_V1[2:]
    assert decode_metadata(data).allocation == assignment(version=2)


def test_a_newer_version_is_read_with_the_newest_layout():
    data = b"\x00\x07" + ASSIGNMENT_V1[2:] + b"future fields"
    a = decode_assignment(data)
    assert a.version == 7 and a.tasks == [("c", 0), ("c", 2)] and a.delay_ms == 250


def test_bad_input_raises_decode_error():
    with pytest.raises(DecodeError):
        decode_assignment(b"\xff\xff" + ASSIGNMENT_V1[2:])
    with pytest.raises(DecodeError):
        decode_assignment(ASSIGNMENT_V1[:-3])
    with pytest.raises(DecodeError):
        decode_metadata(b"\x00\x01\x00")


def test_protocols_offered_by_connect_protocol():
    assert protocols_for("sessioned") == ["sessioned", "compatible", "default"]
    assert protocols_for("compatible") == ["compatible", "default"]
    assert protocols_for("eager") == ["default"]
    with pytest.raises(ValueError, match="connect.protocol"):
        protocols_for("cooperative")
