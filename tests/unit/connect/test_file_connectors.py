"""The file source and sink connectors, run directly on real files (no worker)."""
from __future__ import annotations

import os

import pytest

from clients.connect.api import (ConnectError, ExactlyOnceSupport, OffsetStorageReader,
                                 SinkRecord, SourceTaskContext)
from clients.connect.config_def import ConfigException
from clients.connect.connectors.file_sink import (FileStreamSinkConnector, FileStreamSinkTask,
                                                  as_text)
from clients.connect.connectors.file_source import (FileStreamSourceConnector,
                                                    FileStreamSourceTask)
from clients.connect.data import Schema


def source_task(path, stored: dict | None = None, extra: dict | None = None
                ) -> FileStreamSourceTask:
    """A started task reading `path`; `stored` maps filename -> stored offset dict."""
    props = {"file": str(path), "topic": "lines", **(extra or {})}
    stored = stored or {}
    reader = OffsetStorageReader(lambda partition: stored.get(partition["filename"]))
    task = FileStreamSourceTask()
    task.initialize(SourceTaskContext(props, reader))
    task.IDLE_WAIT_S = 0.001
    task.start(props)
    return task


def lines(records) -> list[tuple[str, int]]:
    return [(r.value, r.source_offset["position"]) for r in records or []]


def append(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_reads_each_line_as_a_string_record_with_its_byte_position(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("one\ntwé\n\nthree\n".encode())
    task = source_task(path)
    records = task.poll()
    assert records is not None
    assert lines(records) == [("one", 4), ("twé", 9), ("", 10), ("three", 16)]
    first = records[0]
    assert first.topic == "lines" and first.key is None and first.key_schema is None
    assert first.value_schema == Schema.STRING_SCHEMA
    assert first.source_partition == {"filename": str(path)}
    assert first.kafka_partition is None and isinstance(first.timestamp, int)
    assert task.poll() is None
    task.stop()


def test_batch_size_caps_each_poll(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\nc\nd\ne\n")
    task = source_task(path, extra={"batch.size": "2"})
    assert lines(task.poll()) == [("a", 2), ("b", 4)]
    assert lines(task.poll()) == [("c", 6), ("d", 8)]
    assert lines(task.poll()) == [("e", 10)]
    assert task.poll() is None


def test_a_partial_last_line_is_held_until_completed(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nhalf")
    task = source_task(path)
    assert lines(task.poll()) == [("a", 2)]
    assert task.poll() is None
    append(path, b" and rest\nnext")
    assert lines(task.poll()) == [("half and rest", 16)]
    append(path, b"\n")
    assert lines(task.poll()) == [("next", 21)]


def test_cr_lf_and_crlf_end_lines_and_a_final_cr_waits_for_what_follows(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\r\nb\rc\nd\r")
    task = source_task(path)
    assert lines(task.poll()) == [("a", 3), ("b", 5), ("c", 7)]
    assert task.poll() is None          # "d\r" may yet be "d\r\n"
    append(path, b"\ne\r")
    assert lines(task.poll()) == [("d", 10)]
    append(path, b"f\n")
    assert lines(task.poll()) == [("e", 12), ("f", 14)]


def test_lines_longer_than_a_chunk_and_characters_split_across_chunks(tmp_path):
    path = tmp_path / "in.txt"
    text = "é" * 10 + "\n" + "x" * 7 + "\r\n" + "ü\n"
    path.write_bytes(text.encode())
    task = source_task(path)
    task.CHUNK_BYTES = 3
    records = []
    while (batch := task.poll()) is not None:
        records += batch
    assert lines(records) == [("é" * 10, 21), ("x" * 7, 30), ("ü", 33)]


def test_resumes_after_the_stored_position(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    task = source_task(path, stored={str(path): {"position": 4}})
    assert lines(task.poll()) == [("two", 8), ("three", 14)]


def test_a_stored_position_past_the_end_reads_from_the_start(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"new\n")
    task = source_task(path, stored={str(path): {"position": 100}})
    assert lines(task.poll()) == [("new", 4)]


def test_a_stored_position_of_the_wrong_type_fails_the_task(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\n")
    task = source_task(path, stored={str(path): {"position": "4"}})
    with pytest.raises(ConnectError, match="Offset position is the incorrect type"):
        task.poll()


def test_follows_a_growing_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"")
    task = source_task(path)
    assert task.poll() is None
    for i in range(3):
        append(path, f"line {i}\n".encode())
        assert lines(task.poll()) == [(f"line {i}", 7 * (i + 1))]
        assert task.poll() is None


def test_waits_for_a_file_that_does_not_exist_yet(tmp_path):
    path = tmp_path / "later.txt"
    task = source_task(path)
    assert task.poll() is None
    assert task.poll() is None
    path.write_bytes(b"here\n")
    assert lines(task.poll()) == [("here", 5)]


def test_a_truncated_file_is_read_again_from_its_start(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"first line\nsecond line\n")
    task = source_task(path)
    assert len(task.poll() or []) == 2
    path.write_bytes(b"new\n")          # truncates, then writes less than was read
    assert lines(task.poll()) == [("new", 4)]


def test_a_replaced_file_is_read_from_its_start(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"old\n")
    task = source_task(path)
    assert lines(task.poll()) == [("old", 4)]
    fresh = tmp_path / "fresh.txt"
    fresh.write_bytes(b"rotated file\n")
    os.replace(fresh, path)             # a new inode under the same name
    assert lines(task.poll()) == [("rotated file", 13)]


def test_stop_ends_polling(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\n")
    task = source_task(path)
    task.stop()
    assert task.poll() is None


def test_source_connector_config_and_tasks():
    connector = FileStreamSourceConnector()
    assert connector.KAFKA_NAME == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    with pytest.raises(ConfigException) as missing:
        connector.start({"file": "/tmp/x"})
    assert missing.value.key == "topic"
    with pytest.raises(ConfigException, match="single topic"):
        connector.start({"file": "/tmp/x", "topic": "a,b"})
    props = {"file": "/tmp/x", "topic": "t", "batch.size": "10"}
    connector.start(props)
    assert connector.task_configs(5) == [props]
    assert connector.task_class() is FileStreamSourceTask
    errors = {v.name: v.errors for v in connector.validate({"topic": "", "batch.size": "x"})}
    assert errors["file"] == [] and errors["topic"] and errors["batch.size"]
    assert connector.exactly_once_support(props) == ExactlyOnceSupport.SUPPORTED
    assert connector.exactly_once_support({"topic": "t"}) == ExactlyOnceSupport.UNSUPPORTED


# ------------------------------------------------------------------------- the sink

def sink_record(value, offset: int = 0) -> SinkRecord:
    return SinkRecord("t", 0, None, None, None, value, kafka_offset=offset)


def test_sink_appends_each_value_as_a_line_and_flush_makes_it_visible(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("before\n")
    task = FileStreamSinkTask()
    task.start({"file": str(path)})
    task.put([sink_record("a"), sink_record(None), sink_record(b"caf\xc3\xa9")])
    task.put([])
    task.put([sink_record(42), sink_record(True), sink_record({"k": [1, None]})])
    task.flush({})
    assert path.read_text() == "before\na\nnull\ncafé\n42\ntrue\n{k=[1, null]}\n"
    task.stop()
    task.stop()


def test_sink_task_that_cannot_create_its_file_fails(tmp_path):
    with pytest.raises(ConnectError, match="Couldn't find or create file"):
        FileStreamSinkTask().start({"file": str(tmp_path / "no" / "such" / "dir.txt")})


def test_sink_connector_gives_every_task_the_same_config():
    connector = FileStreamSinkConnector()
    props = {"file": "/tmp/out", "topics": "a,b"}
    connector.start(props)
    assert connector.task_configs(3) == [props, props, props]
    assert connector.task_class() is FileStreamSinkTask
    assert connector.config().names() == ["file"]


def test_as_text_prints_like_java():
    assert as_text(None) == "null"
    assert as_text(False) == "false"
    assert as_text(1.5) == "1.5"
    assert as_text(["x", {"a": b"b"}]) == "[x, {a=b}]"
