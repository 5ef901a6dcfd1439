"""The request header decoder (read in place, one per request on a broker): every version's
fields, the client id's null and its bounds, and the same errors as the Reader's."""
from __future__ import annotations

import pytest

from clients.protocol.headers import (RequestHeader, decode_request_header, encode_request_header,
                                      peek_api)
from clients.protocol.types import DecodeError, Reader, Writer


def _frame(header: RequestHeader, version: int, body: bytes = b"\x07") -> bytes:
    w = Writer()
    encode_request_header(w, header, version)
    return w.getvalue() + body


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("client_id", ["producer-1", "", None, "zürich"])
def test_each_header_version_decodes_what_was_encoded_and_leaves_the_body(version, client_id):
    header = RequestHeader(3, 12, 2 ** 31 - 1, client_id)
    r = Reader(_frame(header, version))
    got = decode_request_header(r, version)
    assert (got.api_key, got.api_version, got.correlation_id) == (3, 12, 2 ** 31 - 1)
    assert got.client_id == (client_id if version >= 1 else None)
    assert bytes(r.buf[r.pos:r.end]) == b"\x07"
    assert peek_api(_frame(header, version)) == (3, 12, 2 ** 31 - 1)


def test_tagged_fields_of_header_v2_are_skipped():
    w = Writer()
    encode_request_header(w, RequestHeader(1, 4, 9, "c"), 1)
    w.uvarint(1), w.uvarint(5), w.uvarint(2), w.raw(b"ab")   # one tag of two bytes
    r = Reader(w.getvalue() + b"\x07")
    assert decode_request_header(r, 2).client_id == "c"
    assert bytes(r.buf[r.pos:]) == b"\x07"


@pytest.mark.parametrize("cut", range(0, 13))
def test_a_header_cut_short_is_a_decode_error(cut):
    frame = _frame(RequestHeader(1, 4, 9, "client"), 1, body=b"")
    with pytest.raises(DecodeError):
        decode_request_header(Reader(frame[:cut]), 1)
    if cut < 8:
        with pytest.raises(DecodeError):
            peek_api(frame[:cut])


def test_a_client_id_that_is_not_utf8_is_a_decode_error():
    frame = _frame(RequestHeader(1, 4, 9, "x"), 1)[:-2] + b"\xff\x07"
    with pytest.raises(DecodeError):
        decode_request_header(Reader(frame), 1)


def test_a_reader_over_part_of_a_buffer_stops_at_its_end():
    frame = _frame(RequestHeader(1, 4, 9, "client"), 1, body=b"")
    with pytest.raises(DecodeError):
        decode_request_header(Reader(frame + b"more", 0, len(frame) - 1), 1)
    r = Reader(b"zz" + frame, 2)
    assert decode_request_header(r, 1).client_id == "client" and r.pos == r.end
