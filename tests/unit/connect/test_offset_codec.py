"""Kafka Connect's storage formats, byte for byte (offsets, configs, statuses), the readers
that rebuild state from those records (task configs applied only at their commit, junk
skipped), and the standalone stores: FileOffsetStore's round trip and crash safety."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from clients.connect.api import ConnectError
from clients.connect.runtime.config_store import (ConnectorConfigUpdated, ConnectorRemoved,
                                                  MemoryConfigStore, RestartRequested,
                                                  SessionKey,
                                                  TargetStateChanged, TasksCommitted,
                                                  commit_key, connector_key,
                                                  encode_config_record, target_state_key,
                                                  task_key)
from clients.connect.runtime.kafka_log import KeyPositions, cleanup_policy_message
from clients.connect.runtime.offset_store import (FileOffsetStore, dumps_json, offset_key,
                                                  offset_value, parse_offset_record)
from clients.connect.runtime.status_store import (ConnectorStatus, MemoryStatusStore,
                                                  TaskStatus, TopicStatus,
                                                  connector_status_key, encode_status,
                                                  encode_topic_status, task_status_key,
                                                  topic_status_key)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ---------------------------------------------------------------- offsets: bytes

def test_offset_key_and_value_are_kafkas_compact_json():
    assert offset_key("c", {"filename": "/x"}) == b'["c",{"filename":"/x"}]'
    assert offset_key("local-file-source", {"filename": "/tmp/in.txt"}) == \
        b'["local-file-source",{"filename":"/tmp/in.txt"}]'
    assert offset_value({"position": 1234}) == b'{"position":1234}'
    assert offset_value({"a": 1.5, "b": True, "c": None, "d": "s"}) == \
        b'{"a":1.5,"b":true,"c":null,"d":"s"}'
    assert offset_value(None) is None
    assert offset_key("c", {}) == b'["c",{}]'


def test_json_escapes_as_jackson_writes_them():
    # Non-ASCII as UTF-8, not \u escapes; "/" not escaped; short escapes for \n, \t...;
    # other control characters as \u00XX with upper-case hex.
    assert dumps_json({"f": "é/ü"}) == '{"f":"é/ü"}'.encode("utf-8")
    assert dumps_json(["\n\t\r\b\f\"\\"]) == b'["\\n\\t\\r\\b\\f\\"\\\\"]'
    assert dumps_json(["\x01\x1f"]) == b'["\\u0001\\u001F"]'
    # A literal backslash followed by "u001f" is text, left alone; an escaped backslash
    # followed by a real control character gets the upper-case escape.
    assert dumps_json(["\\u001f"]) == b'["\\\\u001f"]'
    assert dumps_json(["\\\x1f"]) == b'["\\\\\\u001F"]'
    for s in ("\\u001f", "\\\x1f", "a\x1fb\\\\u00ff", "\x7f"):
        assert json.loads(dumps_json([s])) == [s]


def test_parse_offset_record_reads_kafkas_records():
    assert parse_offset_record(b'["c",{"filename":"/x"}]', b'{"position":5}') == \
        ("c", {"filename": "/x"}, {"position": 5})
    # What Kafka's Jackson may write with spaces or another key order reads the same.
    assert parse_offset_record(b'[ "c" , {"b":1, "a":2} ]', None) == ("c", {"b": 1, "a": 2}, None)


@pytest.mark.parametrize("key,value", [
    (None, b'{"p":1}'),
    (b"not json", b'{"p":1}'),
    (b'{"c":{}}', b'{"p":1}'),                  # not a list
    (b'["c",{},1]', b'{"p":1}'),                # three elements
    (b'[1,{"p":1}]', b'{"p":1}'),               # connector not a string
    (b'["c",null]', b'{"p":1}'),                # partition not a map
    (b'["c",{"f":"x"}]', b"garbage"),
    (b'["c",{"f":"x"}]', b"[1,2]"),             # offset not a map
])
def test_parse_offset_record_skips_junk_with_a_warning(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger="strom.connect.offsets"):
        assert parse_offset_record(key, value) is None
    assert caplog.records


# ---------------------------------------------------------------- configs: bytes

def test_config_records_are_kafkas():
    assert connector_key("my-conn") == "connector-my-conn"
    assert task_key("my-conn", 2) == "task-my-conn-2"
    assert commit_key("my-conn") == "commit-my-conn"
    assert target_state_key("my-conn") == "target-state-my-conn"
    assert encode_config_record("connector", properties={"name": "a", "tasks.max": "1"}) == \
        b'{"properties":{"name":"a","tasks.max":"1"}}'
    assert encode_config_record("task", properties={"file": "/x"}) == b'{"properties":{"file":"/x"}}'
    assert encode_config_record("commit", tasks=3) == b'{"tasks":3}'
    assert encode_config_record("target_state", state="STARTED") == \
        b'{"state":"STARTED","state.v2":"STARTED"}'
    assert encode_config_record("target_state", state="PAUSED") == \
        b'{"state":"PAUSED","state.v2":"PAUSED"}'
    # Older workers know no STOPPED: they read PAUSED.
    assert encode_config_record("target_state", state="STOPPED") == \
        b'{"state":"PAUSED","state.v2":"STOPPED"}'
    assert encode_config_record("restart", include_tasks=True, only_failed=False) == \
        b'{"include-tasks":true,"only-failed":false}'
    assert encode_config_record("task_count", task_count=4) == b'{"task-count":4}'
    assert encode_config_record("session_key", key=b"\x00\x01secret", algorithm="HmacSHA256",
                                creation_timestamp=1700000000000) == \
        b'{"key":"AAFzZWNyZXQ=","algorithm":"HmacSHA256","creation-timestamp":1700000000000}'


# ---------------------------------------------------------------- statuses: bytes

def test_status_records_are_kafkas():
    assert connector_status_key("my-conn") == "status-connector-my-conn"
    assert task_status_key("my-conn", 0) == "status-task-my-conn-0"
    assert topic_status_key("my-conn", "orders") == "status-topic-orders:connector-my-conn"
    assert encode_status(ConnectorStatus("c", "RUNNING", None, "10.0.0.1:8083", 5)) == \
        b'{"state":"RUNNING","trace":null,"worker_id":"10.0.0.1:8083","generation":5}'
    assert encode_status(TaskStatus(("c", 1), "FAILED", "Traceback:\n  boom", "h:8083", 0)) == \
        b'{"state":"FAILED","trace":"Traceback:\\n  boom","worker_id":"h:8083","generation":0}'
    assert encode_status(TaskStatus(("c", 1), "DESTROYED", None, "h:8083", 0)) is None
    assert encode_topic_status(TopicStatus("orders", "c", 2, 1700000000123)) == \
        b'{"topic":{"name":"orders","connector":"c","task":2,"discoverTimestamp":1700000000123}}'


def test_kafkas_cleanup_policy_message():
    assert cleanup_policy_message("connect-status", "status.storage.topic",
                                  "connector and task statuses", "delete") == (
        "Topic 'connect-status' supplied via the 'status.storage.topic' property is required "
        "to have 'cleanup.policy=compact' to guarantee consistency and durability of connector "
        "and task statuses, but found the topic currently has 'cleanup.policy=delete'. "
        "Continuing would likely result in eventually losing connector and task statuses and "
        "problems restarting this Connect cluster in the future. Change the "
        "'status.storage.topic' property in the Connect worker configurations to use a topic "
        "with 'cleanup.policy=compact'.")


def test_key_positions_keep_the_newest_record_per_key():
    order = KeyPositions()
    assert order.newer("k", 0, 10)          # an acknowledged write, applied at once
    assert not order.newer("k", 0, 7)       # an older record consumed afterwards
    assert not order.newer("k", 0, 10)      # the write itself, consumed
    assert order.newer("k", 0, 11)
    assert order.newer("k", 3, 2)           # another partition: not comparable, later wins


# ---------------------------------------------------------------- the config reader

def test_task_configs_appear_only_with_their_commit():
    async def main() -> None:
        store = MemoryConfigStore()
        events: list[Any] = []
        store.add_listener(events.append)
        await store.start()
        await store.put_connector_config("c", {"name": "c", "tasks.max": "2"})
        snap = store.snapshot()
        assert snap.connectors() == ["c"] and snap.target_state("c") == "STARTED"
        assert snap.task_count("c") == 0 and snap.task_configs == {}
        # Task records without their commit are buffered, invisible.
        await store._write([(task_key("c", 0), encode_config_record("task", properties={"t": "0"}))])
        assert store.snapshot().task_configs == {}
        await store._write([(task_key("c", 1), encode_config_record("task", properties={"t": "1"})),
                            (commit_key("c"), encode_config_record("commit", tasks=2))])
        snap = store.snapshot()
        assert snap.task_count("c") == 2
        assert snap.task_configs["c"] == [{"t": "0"}, {"t": "1"}]
        assert snap.task_config("c", 1) == {"t": "1"} and snap.task_config("c", 2) is None
        # A smaller generation: task 1's old config is no longer part of it.
        await store.put_task_configs("c", [{"t": "new"}])
        assert store.snapshot().task_configs["c"] == [{"t": "new"}]
        assert store.snapshot().offset == 6      # six records read
        assert events == [ConnectorConfigUpdated("c"), TasksCommitted("c"), TasksCommitted("c")]
    run(main())


def test_a_commit_missing_task_configs_makes_the_connector_inconsistent():
    async def main() -> None:
        store = MemoryConfigStore()
        await store.start()
        await store.put_connector_config("c", {"name": "c"})
        # As after compaction removed task 0's record of this generation.
        await store._write([(task_key("c", 1), encode_config_record("task", properties={})),
                            (commit_key("c"), encode_config_record("commit", tasks=2))])
        snap = store.snapshot()
        assert snap.inconsistent == {"c"} and snap.task_configs["c"] == []
        assert snap.task_count("c") == 2
        await store.put_task_configs("c", [{"a": "0"}, {"a": "1"}])
        snap = store.snapshot()
        assert snap.inconsistent == set() and snap.task_configs["c"] == [{"a": "0"}, {"a": "1"}]
    run(main())


def test_target_states_and_removal():
    async def main() -> None:
        store = MemoryConfigStore()
        events: list[Any] = []
        store.add_listener(events.append)
        await store.start()
        # Created paused: the target state record goes first, no event for it (no connector yet).
        await store.put_connector_config("c", {"name": "c"}, target_state="PAUSED")
        assert store.snapshot().target_states == {"c": "PAUSED"}
        await store.put_target_state("c", "STOPPED")
        await store.put_target_state("c", "STOPPED")          # unchanged: no event
        await store.put_task_configs("c", [{"x": "1"}])
        await store.remove_connector_config("c")
        snap = store.snapshot()
        assert snap.connectors() == [] and snap.target_states == {}
        assert snap.task_configs == {} and snap.task_count("c") == 0
        assert events == [ConnectorConfigUpdated("c"), TargetStateChanged("c", "STOPPED"),
                          TasksCommitted("c"), ConnectorRemoved("c")]
        with pytest.raises(ValueError):
            await store.put_target_state("c", "RUNNING")
        key = SessionKey(b"k" * 32, "HmacSHA256", 123)
        await store.put_restart_request("c", only_failed=True, include_tasks=False)
        await store.put_session_key(key)
        assert store.snapshot().session_key == key
        assert events[-1] == RestartRequested("c", True, False)    # the key: no event
    run(main())


def test_config_reader_takes_older_formats_and_skips_junk(caplog):
    async def main() -> None:
        store = MemoryConfigStore()
        events: list[Any] = []
        store.add_listener(events.append)
        await store.start()
        await store._write([
            (connector_key("c"), b'{"properties":{"name":"c"}}'),
            (target_state_key("c"), b'{"state":"PAUSED"}'),         # a 0.10..3.4 worker's
            (connector_key("d"), b"not json"),
            (connector_key("e"), b'{"properties":[1]}'),
            (task_key("c", 0).replace("-0", "-x"), b'{"properties":{}}'),
            (commit_key("c"), b'{"tasks":"two"}'),
            (target_state_key("c"), b'{"state":"SLEEPING"}'),
            ("weird-key", b"{}"),
        ])
        snap = store.snapshot()
        assert snap.connectors() == ["c"] and snap.target_states == {"c": "PAUSED"}
        assert snap.offset == 8          # junk still moves the position
        assert events == [ConnectorConfigUpdated("c"), TargetStateChanged("c", "PAUSED")]
    with caplog.at_level(logging.ERROR, logger="strom.connect.configs"):
        run(main())
    assert len(caplog.records) >= 5


# ---------------------------------------------------------------- the status reader

def test_status_store_put_safe_and_deletes():
    async def main() -> None:
        store = MemoryStatusStore()
        await store.start()
        await store.put(ConnectorStatus("c", "RUNNING", None, "w1:8083", 3))
        await store.put(TaskStatus(("c", 1), "RUNNING", None, "w1:8083", 3))
        await store.put(TaskStatus(("c", 0), "FAILED", "trace", "w1:8083", 3))
        assert [t.task for t in store.get_all_tasks("c")] == [0, 1]
        # Another worker of an older generation may not overwrite; the same worker, or a
        # newer generation, may.
        assert not await store.put_safe(ConnectorStatus("c", "UNASSIGNED", None, "w2:8083", 2))
        assert store.get_connector("c") == ConnectorStatus("c", "RUNNING", None, "w1:8083", 3)
        assert await store.put_safe(ConnectorStatus("c", "PAUSED", None, "w1:8083", 1))
        assert await store.put_safe(TaskStatus(("c", 1), "RUNNING", None, "w2:8083", 4))
        assert store.get_task("c", 1) == TaskStatus(("c", 1), "RUNNING", None, "w2:8083", 4)
        assert await store.put_safe(TaskStatus(("c", 7), "RUNNING", None, "w2:8083", 0))
        await store.put(TaskStatus(("c", 7), "DESTROYED", None, "w2:8083", 0))
        assert store.get_task("c", 7) is None
        await store.put_topic("c", "orders", 0)
        first = store.get_topic("c", "orders")
        await store.put_topic("c", "orders", 1)          # already known: kept as it was
        await store.put_topic("c", "audit", 1)
        assert store.get_topic("c", "orders") == first and store.topics("c") == ["audit", "orders"]
        await store.delete_topics("c")
        assert store.topics("c") == []
        assert store.connectors() == {"c"}
        await store.delete_connector("c")
        assert store.connectors() == set() and store.get_all_tasks("c") == []
    run(main())


def test_status_reader_a_connector_tombstone_forgets_its_tasks_and_junk_is_skipped():
    store = MemoryStatusStore()
    store._read("status-task-my-conn-3", encode_status(
        TaskStatus(("my-conn", 3), "RUNNING", None, "w", 1)), 0, 0)
    store._read("status-connector-my-conn", encode_status(
        ConnectorStatus("my-conn", "RUNNING", None, "w", 1)), 0, 1)
    assert store.get_task("my-conn", 3) is not None
    for key, value in [("status-task-my-conn-x", b"{}"), ("status-connector-", b"{}"),
                       ("status-connector-z", b'{"state":"NAPPING","worker_id":"w","generation":1}'),
                       ("status-connector-z", b"junk"), ("status-topic-nocolon", b"{}"),
                       ("status-topic-t:connector-z", b'{"topic":{"name":"t"}}'), ("other", b"{}")]:
        store._read(key, value, 0, 2)
    assert store.connectors() == {"my-conn"} and store.topics("z") == []
    store._read("status-connector-my-conn", None, 0, 3)
    assert store.get_task("my-conn", 3) is None and store.connectors() == set()


# ---------------------------------------------------------------- FileOffsetStore

def test_file_offset_store_round_trip(tmp_path):
    path = tmp_path / "connect.offsets"

    async def main() -> None:
        store = FileOffsetStore(path)
        await store.start()
        assert store.get("c", {"filename": "/x"}) is None
        await store.write("c", [({"filename": "/x"}, {"position": 10}),
                                ({"filename": "/y"}, {"position": 3})])
        await store.write("d", [({"q": 1}, {"n": "é"})])
        await store.write("c", [({"filename": "/y"}, None)])        # a tombstone deletes
        assert store.get("c", {"filename": "/x"}) == {"position": 10}
        await store.stop()

        again = FileOffsetStore(path)
        await again.start()
        assert again.get("c", {"filename": "/x"}) == {"position": 10}
        assert again.get("c", {"filename": "/y"}) is None
        assert again.get("d", {"q": 1}) == {"n": "é"}
        assert again.connector_offsets("c") == [({"filename": "/x"}, {"position": 10})]
        assert again.connectors() == {"c", "d"}
    run(main())
    assert path.read_bytes() == ('{"offsets":[[["c",{"filename":"/x"}],{"position":10}],'
                                 '[["d",{"q":1}],{"n":"é"}]]}').encode("utf-8")
    assert not (tmp_path / "connect.offsets.tmp").exists()


def test_file_offset_store_a_crash_never_leaves_half_a_file(tmp_path):
    path = tmp_path / "connect.offsets"
    tmp = tmp_path / "connect.offsets.tmp"

    async def main() -> None:
        store = FileOffsetStore(path)
        await store.start()
        await store.write("c", [({"f": "a"}, {"pos": 1})])
        # A crash in the middle of the next rewrite left half a temp file behind.
        tmp.write_bytes(b'{"offsets":[[["c",{"f":"a"}],{"pos":')
        after_crash = FileOffsetStore(path)
        await after_crash.start()
        assert after_crash.get("c", {"f": "a"}) == {"pos": 1}
        await after_crash.write("c", [({"f": "a"}, {"pos": 2})])     # replaces the leftover
        assert json.loads(path.read_bytes()) == {"offsets": [[["c", {"f": "a"}], {"pos": 2}]]}
        assert not tmp.exists()
        # A rewrite that fails (here the temp file cannot be created) changes nothing: the
        # file keeps the last durable state and memory does not run ahead of it.
        tmp.mkdir()
        with pytest.raises(ConnectError, match="Failed to write offsets"):
            await after_crash.write("c", [({"f": "a"}, {"pos": 3})])
        assert after_crash.get("c", {"f": "a"}) == {"pos": 2}
        assert json.loads(path.read_bytes()) == {"offsets": [[["c", {"f": "a"}], {"pos": 2}]]}
    run(main())


def test_file_offset_store_refuses_a_corrupt_file_and_skips_bad_entries(tmp_path):
    path = tmp_path / "offsets"
    path.write_bytes(b"\x00garbage")
    with pytest.raises(ConnectError, match="not JSON"):
        run(FileOffsetStore(path).start())
    path.write_bytes(b'{"offsets":[[["c",{"f":"a"}],{"pos":1}], [["c"],{"pos":2}], 7,'
                     b' [["c",{"f":"b"}],null]]}')
    store = FileOffsetStore(path)
    run(store.start())
    assert store.connector_offsets("c") == [({"f": "a"}, {"pos": 1})]
