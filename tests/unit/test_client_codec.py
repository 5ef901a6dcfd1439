"""The client-side sans-io codec: request framing, in-flight FIFO, response reassembly.

No sockets: responses are encoded here with the same schema codecs the broker uses, and fed
to `ClientProtocol` in every way a TCP stream can cut them.
"""
from __future__ import annotations

import struct
from typing import Any

import pytest

from clients.protocol.client_codec import (
    ClientProtocol, CorrelationIdMismatchError, FrameTooLargeError, ProtocolError,
    UnexpectedResponseError, expects_response)
from clients.protocol.headers import (RequestHeader, decode_request_header,
                                     encode_request_header, encode_response_header)
from clients.protocol.messages import api
from clients.protocol.records import Record, build_batch, iter_batches
from clients.protocol.schema import UnsupportedVersion
from clients.protocol.types import DeferredBytes, Reader, Writer


def response_frame(api_name: str, version: int, cid: int, body: Any, *,
                   header_version: int | None = None, body_version: int | None = None) -> bytes:
    """A response frame as a broker writes it."""
    a = api(api_name)
    w = Writer()
    hv = a.response_header_version(version) if header_version is None else header_version
    encode_response_header(w, cid, hv)
    a.encode_response(body, version if body_version is None else body_version, w)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


def metadata_body(topic: str) -> dict:
    return {"brokers": [{"node_id": 0, "host": "h", "port": 9092}],
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "leader_id": 0}]}]}


def split_request(frame: bytes) -> tuple[int, bytes]:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return size, frame[4:]


# ---------------------------------------------------------------- requests

@pytest.mark.parametrize("version, header_version", [(0, 1), (8, 1), (9, 2), (12, 2)])
def test_request_frame_has_size_prefix_and_right_header(version, header_version):
    p = ClientProtocol("my-client", first_correlation_id=7)
    body = {"topics": [{"name": "t"}]}
    cid, frame = p.encode_request("Metadata", body, version)
    assert cid == 7
    _, payload = split_request(frame)
    r = Reader(payload)
    h = decode_request_header(r, header_version)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, version, 7, "my-client")
    decoded = api("Metadata").decode_request(r, version)
    assert [t.name for t in decoded.topics] == ["t"]
    assert r.remaining() == 0


@pytest.mark.parametrize("client_id", ["my-client", "", None, "klient-\u043a\u043b"])
@pytest.mark.parametrize("api_name, version, body", [
    ("ControlledShutdown", 0, {"broker_id": 3}),                       # header v0
    ("Metadata", 8, {"topics": [{"name": "t"}]}),                      # header v1
    ("Metadata", 9, {"topics": [{"name": "t"}]}),                      # header v2
    ("Produce", 9, {"acks": 1, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x" * 300}]}]}),
])
def test_request_frame_is_the_reference_encoding_byte_for_byte(client_id, api_name, version,
                                                              body):
    # The frame is written in one buffer (header fields in one pack, the client id's bytes
    # kept): it must be what the header and body encoders give, size prefix first.
    p = ClientProtocol(client_id, first_correlation_id=41)
    cid, frame = p.encode_request(api_name, body, version)
    a = api(api_name)
    w = Writer()
    encode_request_header(w, RequestHeader(a.key, version, cid, client_id),
                          a.request_header_version(version))
    a.encode_request(body, version, w)
    payload = w.getvalue()
    assert type(frame) is bytes and frame == struct.pack(">i", len(payload)) + payload


class _Region(DeferredBytes):
    size = 10


def test_framed_refuses_deferred_chunks():
    w = Writer(b"\x00" * 4)
    w.bytes_([_Region()])
    with pytest.raises(TypeError):
        w.framed()


def test_request_header_v0_for_controlled_shutdown_v0():
    p = ClientProtocol("c")
    cid, frame = p.encode_request("ControlledShutdown", {"broker_id": 3}, 0)
    _, payload = split_request(frame)
    r = Reader(payload)
    h = decode_request_header(r, 0)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (7, 0, cid, None)
    assert api("ControlledShutdown").decode_request(r, 0).broker_id == 3
    assert r.remaining() == 0


def test_correlation_ids_increase_and_wrap():
    p = ClientProtocol(first_correlation_id=2**31 - 2)
    ids = [p.encode_request("ApiVersions", {}, 0)[0] for _ in range(4)]
    assert ids == [2**31 - 2, 2**31 - 1, 0, 1]
    assert [f.correlation_id for f in p.pending()] == ids


def test_unsupported_version_registers_nothing():
    p = ClientProtocol(first_correlation_id=5)
    with pytest.raises(UnsupportedVersion):
        p.encode_request("Metadata", {}, 99)
    assert p.in_flight == 0
    assert p.encode_request("Metadata", {}, 1)[0] == 5


def test_produce_acks_0_expects_no_response():
    produce = api("Produce")
    assert not expects_response(produce, {"acks": 0})
    assert expects_response(produce, {"acks": 1})
    assert expects_response(produce, {"acks": -1})
    assert expects_response(api("Metadata"), {})
    p = ClientProtocol()
    c0, _ = p.encode_request("Produce", {"acks": 0, "timeout_ms": 1000, "topic_data": []}, 7)
    c1, _ = p.encode_request("Metadata", {"topics": []}, 1)
    assert p.in_flight == 1 and p.pending()[0].correlation_id == c1 == c0 + 1
    # The broker answers only the Metadata request; it matches.
    got = p.feed(response_frame("Metadata", 1, c1, metadata_body("x")))
    assert [(cid, r.topics[0].name) for cid, r in got] == [(c1, "x")]


# ---------------------------------------------------------------- responses

def _pipelined(n: int = 5) -> tuple[ClientProtocol, list[int], bytes]:
    """n Metadata requests in flight at various versions and one stream of their answers."""
    p = ClientProtocol()
    cids, stream = [], b""
    for i in range(n):
        version = (1, 5, 9, 12, 0)[i % 5]
        cid, _ = p.encode_request("Metadata", {"topics": [{"name": f"t{i}"}]}, version)
        cids.append(cid)
        stream += response_frame("Metadata", version, cid, metadata_body(f"t{i}"))
    return p, cids, stream


def test_whole_stream_in_one_feed():
    p, cids, stream = _pipelined()
    got = p.feed(stream)
    assert [(cid, r.topics[0].name) for cid, r in got] == [(c, f"t{i}") for i, c in enumerate(cids)]
    assert p.in_flight == 0 and p.buffered == 0


def test_byte_at_a_time():
    p, cids, stream = _pipelined()
    got = []
    for i in range(len(stream)):
        got += p.feed(stream[i:i + 1])
        assert p.in_flight == len(cids) - len(got)
    assert [cid for cid, _ in got] == cids
    assert [r.topics[0].name for _, r in got] == [f"t{i}" for i in range(len(cids))]
    assert p.buffered == 0


def test_frame_split_across_reads_at_every_position():
    frame_len = len(response_frame("Metadata", 12, 0, metadata_body("t0")))
    for cut in range(1, frame_len):
        p = ClientProtocol()
        cid, _ = p.encode_request("Metadata", {"topics": [{"name": "t0"}]}, 12)
        frame = response_frame("Metadata", 12, cid, metadata_body("t0"))
        assert p.feed(frame[:cut]) == []
        assert p.in_flight == 1
        got = p.feed(memoryview(frame)[cut:])
        assert [(c, r.topics[0].name) for c, r in got] == [(cid, "t0")]


def test_one_read_ends_one_frame_and_starts_the_next():
    p, cids, stream = _pipelined(3)
    first = len(response_frame("Metadata", 1, cids[0], metadata_body("t0")))
    got = p.feed(stream[:first + 6])
    assert [c for c, _ in got] == cids[:1]
    got = p.feed(bytearray(stream[first + 6:]))
    assert [c for c, _ in got] == cids[1:]


def test_api_versions_response_uses_header_v0_even_when_flexible():
    p = ClientProtocol()
    cid, _ = p.encode_request("ApiVersions", {"client_software_name": "strom",
                                              "client_software_version": "1"}, 3)
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
            "throttle_time_ms": 0}
    frame = response_frame("ApiVersions", 3, cid, body)
    # Header v0 is the bare correlation id: the body's compact array follows at byte 8.
    assert frame[4:8] == struct.pack(">i", cid)
    (resp,) = p.feed(frame)
    assert resp[0] == cid
    assert [(k.api_key, k.min_version, k.max_version) for k in resp[1].api_keys] == [(18, 0, 3)]


def test_flexible_response_header_tagged_fields_are_skipped():
    p = ClientProtocol()
    cid, _ = p.encode_request("Metadata", {"topics": None}, 12)
    frame = bytearray(response_frame("Metadata", 12, cid, metadata_body("t")))
    # Replace the empty header tag section (one 0 byte after the cid) with one unknown tag.
    assert frame[8] == 0
    frame[8:9] = bytes([1, 5, 2, 0xAA, 0xBB])
    frame[0:4] = struct.pack(">i", len(frame) - 4)
    ((got_cid, resp),) = p.feed(bytes(frame))
    assert got_cid == cid and resp.topics[0].name == "t"


def test_api_versions_unsupported_version_answer_is_read_as_v0():
    """A broker that does not know our ApiVersions version answers error 35 with its
    ranges in the v0 body format (and header v0)."""
    p = ClientProtocol()
    cid, _ = p.encode_request("ApiVersions", {"client_software_name": "strom",
                                              "client_software_version": "1"}, 3)
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2},
                                           {"api_key": 3, "min_version": 0, "max_version": 9}]}
    ((got_cid, resp),) = p.feed(response_frame("ApiVersions", 3, cid, body,
                                                header_version=0, body_version=0))
    assert got_cid == cid and resp.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == {
        18: (0, 2), 3: (0, 9)}


def test_records_stay_memoryview_slices():
    batch = build_batch([Record(b"k", b"v" * 100), Record(None, b"w")], now_ms=1000)
    p = ClientProtocol()
    cid, _ = p.encode_request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": []}, 11)
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 2, "records": batch}]}]}
    ((_, resp),) = p.feed(response_frame("Fetch", 11, cid, body))
    records = resp.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert bytes(records) == batch
    (parsed,) = iter_batches(records)
    assert [r.value for r in parsed.records] == [b"v" * 100, b"w"]


def test_records_of_earlier_responses_survive_later_feeds():
    batch = build_batch([Record(None, b"x" * 50)], now_ms=1)
    p = ClientProtocol()
    stream, cids = b"", []
    for _ in range(3):
        cid, _ = p.encode_request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": []}, 4)
        cids.append(cid)
        stream += response_frame("Fetch", 4, cid, {"responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "records": batch}]}]})
    first = p.feed(stream[:len(stream) // 2 + 3])
    rest = p.feed(stream[len(stream) // 2 + 3:])
    got = first + rest
    assert [c for c, _ in got] == cids
    assert all(bytes(r.responses[0].partitions[0].records) == batch for _, r in got)


def _fetch_frame(cid: int, batch: bytes) -> bytes:
    return response_frame("Fetch", 11, cid, {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 1, "records": batch}]}]})


@pytest.mark.parametrize("kib", [256, 3 * 1024])
def test_a_large_response_is_received_into_its_own_buffer(kib):
    # What a follower's fetch answer does over a BufferedProtocol: after the first read, the
    # rest of the frame goes straight into the buffer that the decoded records point into.
    # One buffer of the frame's size also for megabytes (a consumer's fetch answers: 16 MiB
    # with 16 partitions of 1 KiB records), not grown by doubling from 1 MiB (five buffers
    # and 15 MiB of copies for 16 MiB).
    batch = build_batch([Record(None, bytes(range(256)) * 4 * kib)], now_ms=1)
    p = ClientProtocol()
    cid, _ = p.encode_request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": []}, 11)
    frame = _fetch_frame(cid, batch)
    first = p.get_buffer()
    first[:1000] = frame[:1000]
    del first
    assert p.buffer_updated(1000) == []
    rest = p.get_buffer()
    assert len(rest) == len(frame) - 1000        # room for exactly the rest of this frame
    rest[:] = frame[1000:]
    own_buffer = rest.obj
    del rest
    ((got_cid, resp),) = p.buffer_updated(len(frame) - 1000)
    records = resp.responses[0].partitions[0].records
    assert got_cid == cid and bytes(records) == batch and p.buffered == 0
    assert records.obj is own_buffer             # not copied out of the receive buffer
    assert records.readonly                      # as if it were bytes (hashable, immutable)


def test_a_claim_of_a_huge_response_is_not_allocated_at_once():
    # A broker that claims a gigabyte gets a buffer of at most 64 MiB until bytes come.
    p = ClientProtocol()
    p.encode_request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": []}, 11)
    first = p.get_buffer()
    first[:8] = struct.pack(">ii", 1 << 30, 0)
    del first
    assert p.buffer_updated(8) == []
    assert len(p.get_buffer()) <= 64 << 20


def test_large_and_small_responses_interleaved_through_get_buffer():
    batches = [build_batch([Record(None, bytes([i]) * size)], now_ms=1)
               for i, size in enumerate([10, 200_000, 70_000, 3, 1_500_000, 64_000])]
    p = ClientProtocol()
    stream = b""
    for b in batches:
        cid, _ = p.encode_request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": []}, 11)
        stream += _fetch_frame(cid, b)
    for chunk in (997, 65_536, 1 << 20):
        q = ClientProtocol(first_correlation_id=0)
        for _ in batches:
            q.encode_request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": []}, 11)
        got, pos = [], 0
        while pos < len(stream):
            buf = q.get_buffer()
            n = min(len(buf), chunk, len(stream) - pos)
            buf[:n] = stream[pos:pos + n]
            del buf
            got += q.buffer_updated(n)
            pos += n
        assert [bytes(r.responses[0].partitions[0].records) for _, r in got] == batches, chunk


# ---------------------------------------------------------------- broken streams

def test_correlation_id_mismatch_is_a_clear_error():
    p = ClientProtocol(first_correlation_id=10)
    p.encode_request("Metadata", {"topics": []}, 1)
    p.encode_request("Metadata", {"topics": []}, 1)
    good = response_frame("Metadata", 1, 10, metadata_body("a"))
    wrong = response_frame("Metadata", 1, 99, metadata_body("b"))
    with pytest.raises(CorrelationIdMismatchError) as info:
        p.feed(good + wrong)
    err = info.value
    assert (err.expected, err.received) == (11, 99)
    assert "expected 11, received 99" in str(err)
    # The response decoded before the error is handed over with it.
    assert [c for c, _ in err.completed] == [10]
    # The stream is broken for good.
    assert p.error is err
    with pytest.raises(CorrelationIdMismatchError):
        p.feed(b"")


def test_response_with_nothing_in_flight():
    p = ClientProtocol()
    with pytest.raises(UnexpectedResponseError):
        p.feed(response_frame("Metadata", 1, 0, metadata_body("a")))


def test_responses_out_of_order_are_refused():
    p = ClientProtocol()
    a, _ = p.encode_request("Metadata", {"topics": []}, 1)
    b, _ = p.encode_request("Metadata", {"topics": []}, 1)
    with pytest.raises(CorrelationIdMismatchError):
        p.feed(response_frame("Metadata", 1, b, metadata_body("b")))


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_nonsense_frame_size(size):
    p = ClientProtocol()
    p.encode_request("Metadata", {"topics": []}, 1)
    with pytest.raises(FrameTooLargeError):
        p.feed(struct.pack(">i", size) + b"\0" * 8)


def test_max_frame_size():
    p = ClientProtocol(max_frame_size=64)
    p.encode_request("Metadata", {"topics": []}, 1)
    with pytest.raises(FrameTooLargeError):
        p.feed(struct.pack(">i", 65))
    q = ClientProtocol(max_frame_size=64)
    cid, _ = q.encode_request("Metadata", {"topics": []}, 1)
    assert len(q.feed(response_frame("Metadata", 1, cid, {"brokers": [], "topics": []}))) == 1


def test_undecodable_body_is_a_protocol_error():
    p = ClientProtocol()
    cid, _ = p.encode_request("Metadata", {"topics": []}, 1)
    payload = struct.pack(">i", cid) + struct.pack(">i", 1000)  # 1000 brokers, no bytes
    with pytest.raises(ProtocolError) as info:
        p.feed(struct.pack(">i", len(payload)) + payload)
    assert "Metadata v1" in str(info.value)


def test_short_frame_body():
    p = ClientProtocol()
    p.encode_request("ApiVersions", {}, 0)
    # A frame holding only a correlation id: the body is missing.
    with pytest.raises(ProtocolError):
        p.feed(struct.pack(">i", 4) + struct.pack(">i", 0))
