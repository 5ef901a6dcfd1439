"""The compiled codecs beyond what the generic round trip covers: objects as input, file
regions between byte chunks, unknown tags, and the shape of the generated code."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from clients.protocol.codegen import compile_struct_reader, compile_struct_writer
from clients.protocol.messages import API_BY_NAME
from clients.protocol.schema import Api, F, Struct
from clients.protocol.types import DecodeError, DeferredBytes, Reader, Writer


@dataclass
class _Partition:
    index: int
    records: bytes


@dataclass
class _Topic:
    name: str
    partition_data: list


def test_objects_with_attributes_encode_as_dicts_do() -> None:
    produce = API_BY_NAME["Produce"]
    as_dicts = {"acks": -1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 3, "records": b"abc"}]}]}

    class Body:
        acks = -1
        timeout_ms = 5
        topic_data = [_Topic("t", [_Partition(3, b"abc")])]

    for v in (3, 9):
        assert produce.encode_request(Body(), v).getvalue() == \
            produce.encode_request(as_dicts, v).getvalue()


class _Region(DeferredBytes):
    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_file_regions_split_the_encoding_and_later_fields_follow_them(version: int) -> None:
    """A fetch answer's records are file regions: the writer must put the bytes before,
    between and after them in order, including fields written after a region."""
    fetch = API_BY_NAME["Fetch"]
    r1, r2 = _Region(100), _Region(7)
    body = {"responses": [{"topic": "t", "topic_id": None, "partitions": [
        {"partition_index": 0, "high_watermark": 11, "records": [r1]},
        {"partition_index": 1, "high_watermark": 22, "records": [r2]}]}]}
    chunks = fetch.encode_response(body, version).chunks()
    assert [c for c in chunks if isinstance(c, DeferredBytes)] == [r1, r2]
    # Replace each region by that many marker bytes: the result must decode as if the
    # records had been inline.
    data = b"".join(b"\x00" * c.size if isinstance(c, DeferredBytes) else c for c in chunks)
    decoded = fetch.decode_response(data, version)
    parts = decoded.responses[0].partitions
    assert [p.partition_index for p in parts] == [0, 1]
    assert [p.high_watermark for p in parts] == [11, 22]
    assert [len(p.records) for p in parts] == [100, 7]


_TAGGED = [
    F("a", "int32"),
    F("name", "string", nullable="0+"),
    F("note", "string", versions="0+", tag=1, default=""),
    F("ids", "[]int64"),
]


def test_unknown_tags_are_skipped_and_known_ones_read() -> None:
    read = compile_struct_reader(_TAGGED, 0, True, Struct)
    # a=7, name=null, ids=[5], tags: {9: b"zz" (unknown), 1: "hi"}
    data = bytes.fromhex("00000007" "00" "02" "0000000000000005" "02" "09" "02" "7a7a"
                         "01" "03" "03" "6869")
    r = Reader(data)
    out = read(r)
    assert out == {"a": 7, "name": None, "note": "hi", "ids": [5]}
    assert r.remaining() == 0


def test_tag_count_and_sizes_are_bounds_checked() -> None:
    read = compile_struct_reader(_TAGGED, 0, True, Struct)
    with pytest.raises(DecodeError):
        read(Reader(bytes.fromhex("00000007" "00" "01" "05" "09" "7f")))   # size 127, 0 left
    with pytest.raises(DecodeError):                                      # ids: 2^31 elements
        read(Reader(bytes.fromhex("00000007" "00" "ffffffff0f")))


def test_a_default_tagged_field_is_not_written() -> None:
    write = compile_struct_writer(_TAGGED, 0, True)
    w = Writer()
    write(w, {"a": 1, "name": "x", "note": "", "ids": []})
    assert w.getvalue() == bytes.fromhex("00000001" "02" "78" "01" "00")


def test_one_codec_per_version_compiled_once() -> None:
    toy = Api(key=9998, name="Toy2", valid=(0, 1), flexible=1, request=_TAGGED, response=[])
    assert toy._codec("req", 1) is toy._codec("req", 1)
    assert toy._codec("req", 0) is not toy._codec("req", 1)


def test_uuid_arrays_round_trip_empty_or_not() -> None:
    """A review found `[]uuid` read as one 16*count-byte string (no declaration uses it yet)."""
    import uuid
    fields = [F("ids", "[]uuid"), F("after", "int8")]
    read, write = compile_struct_reader(fields, 0, False, Struct), compile_struct_writer(fields, 0, False)
    for ids in ([], [uuid.UUID(int=1), uuid.UUID(int=2 ** 127 + 5), uuid.UUID(int=3)]):
        w = Writer()
        write(w, {"ids": ids, "after": 9})
        r = Reader(w.getvalue() + b"\0" * 20)
        assert read(r) == {"ids": ids, "after": 9}
        assert r.remaining() == 20


def test_a_struct_fields_own_default_is_what_a_missing_struct_encodes_as() -> None:
    fields = [F("s", (F("x", "int32"),), default={"x": 7})]
    w = Writer()
    compile_struct_writer(fields, 0, False)(w, {})
    assert w.getvalue() == bytes.fromhex("00000007")


def test_a_signed_or_wide_view_is_read_as_bytes() -> None:
    """A reader handed a memoryview of another format must still see bytes 0-255: a
    signed byte would make a one-byte varint of a negative size."""
    import array
    read = compile_struct_reader([F("a", "int8")], 0, True, Struct)
    wide = memoryview(array.array("i", [1, 0xff, 0xff, 0xff, 0x7f, 5, -2]))
    assert read(Reader(wide)) == read(Reader(bytes(wide)))
    signed = memoryview(bytes.fromhex("05" "01" "01" "ff")).cast("b")
    with pytest.raises(DecodeError):           # tag 1 of size 255, one byte left
        read(Reader(signed))


def test_defaults_of_absent_fields_are_fresh_for_every_message() -> None:
    """Absent struct and array fields decode as literals built per message: changing one
    decoded message's defaults must not show in the next."""
    fetch = API_BY_NAME["Fetch"]
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0}]}]}
    data = fetch.encode_response(body, 12).getvalue()
    first = fetch.decode_response(data, 12).responses[0].partitions[0]
    assert first.current_leader == {"leader_id": -1, "leader_epoch": -1}
    assert first.aborted_transactions is None or first.aborted_transactions == []
    first.current_leader.leader_id = 5
    first.diverging_epoch.epoch = 9
    again = fetch.decode_response(data, 12).responses[0].partitions[0]
    assert again.current_leader.leader_id == -1 and again.diverging_epoch.epoch == -1
    assert isinstance(again.current_leader, Struct)


def test_decoded_fields_are_read_through_properties_of_the_structs_type() -> None:
    """A decoded struct's type carries a property per field, so `s.name` never falls back
    to `__getattr__` (an AttributeError raised and caught per read, ~8x the cost). Setting
    an attribute still sets the key, dict's own methods keep their meaning, and an unknown
    name is still an AttributeError."""
    fields = [F("partition_index", "int32"), F("items", "int32"), F("name", "string")]
    read = compile_struct_reader(fields, 0, False, Struct)
    write = compile_struct_writer(fields, 0, False)
    w = Writer()
    write(w, {"partition_index": 7, "items": 3, "name": "x"})
    s = read(Reader(w.getvalue()))
    assert isinstance(s, Struct) and s == {"partition_index": 7, "items": 3, "name": "x"}
    assert isinstance(type(s).__dict__["partition_index"], property)
    assert "items" not in type(s).__dict__ and s.items() == {"partition_index": 7, "items": 3,
                                                             "name": "x"}.items()
    s.partition_index = 8
    assert s["partition_index"] == 8 and s.partition_index == 8
    s.extra = 1                                   # a key no declaration names
    assert s.extra == 1
    with pytest.raises(AttributeError):
        s.missing


def test_decoded_structs_pickle_and_copy_as_structs() -> None:
    """The per-declaration classes are made at run time and cannot be named by pickle:
    a decoded message must still pickle (a Spark task's arguments) and deep-copy."""
    import copy
    import pickle
    fetch = API_BY_NAME["Fetch"]
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 3}]}]}
    decoded = fetch.decode_response(fetch.encode_response(body, 12).getvalue(), 12)
    for again in (pickle.loads(pickle.dumps(decoded)), copy.deepcopy(decoded)):
        assert again == decoded and isinstance(again, Struct)
        assert again.responses[0].partitions[0].partition_index == 3
