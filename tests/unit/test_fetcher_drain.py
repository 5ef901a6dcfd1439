"""Fetcher.drain without sockets: what poll() hands out when a deserializer fails."""
import pytest

from clients.aio.errors import RecordDeserializationError
from clients.aio.fetcher import Fetcher, PartitionState, _Completed
from clients.config import resolve
from clients.protocol.records import Record, RecordCursor, build_batch, fetch_batches
from clients.types import ConsumerRecord, TopicPartition


def record(offset: int, value: bytes) -> tuple[int, bytes]:
    return offset, value


def fetcher_with(buffers: dict[TopicPartition, list[tuple[int, bytes]]]) -> Fetcher:
    """A fetcher with one fetch buffered per partition: a batch of the given records (their
    offsets consecutive), decoded as drain() takes them."""
    def strict(topic, data):
        if data.startswith(b"bad"):
            raise ValueError(f"cannot decode {data!r}")
        return data.decode()

    # No broker: drain() only reads what fetches buffered, so the client is never used.
    f = Fetcher(None, resolve("consumer", bootstrap_servers="127.0.0.1:1",  # type: ignore[arg-type]
                              value_deserializer=strict))
    for tp, recs in buffers.items():
        first = recs[0][0]
        buf = build_batch([Record(None, v) for _, v in recs], base_offset=first)
        batches, next_offset = fetch_batches(buf, first)
        st = PartitionState(position=first)
        st.buffer.append(_Completed(st.version, first, RecordCursor(
            buf, batches, ConsumerRecord, tp.topic, tp.partition, from_offset=first),
            next_offset))
        f.states[tp] = st
    return f


def test_a_bad_record_keeps_what_came_before_it_and_stops_on_itself():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    f = fetcher_with({a: [record(0, b"a0"), record(1, b"a1")],
                      b: [record(5, b"b5"), record(6, b"bad6"), record(7, b"b7")]})
    # First poll: everything before the bad record, nothing lost, nothing skipped.
    got = f.drain(100)
    assert [(r.partition, r.offset, r.value) for r in got] == [(0, 0, "a0"), (0, 1, "a1"),
                                                               (1, 5, "b5")]
    assert f.states[a].position == 2 and f.states[b].position == 6
    # Next poll: the error, naming the partition and offset (Kafka's
    # RecordDeserializationException); the position stays on the bad record.
    with pytest.raises(RecordDeserializationError) as e:
        f.drain(100)
    assert (e.value.partition, e.value.offset) == (b, 6)
    assert isinstance(e.value.__cause__, ValueError)
    assert f.states[b].position == 6
    # Seeking past it carries on.
    f.states[b].position = 7
    f.states[b].buffer[0].start = 7
    del f.states[b].buffer[0].pending[0]
    assert [r.offset for r in f.drain(100)] == [7]


def test_a_bad_first_record_raises_at_once():
    tp = TopicPartition("t", 0)
    f = fetcher_with({tp: [record(3, b"bad3"), record(4, b"ok")]})
    with pytest.raises(RecordDeserializationError):
        f.drain(10)
    assert f.states[tp].position == 3
