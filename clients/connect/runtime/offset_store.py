"""Source connectors' offsets: Kafka Connect's record format and the two stores.

Format (Kafka's, written by its JsonConverter with schemas.enable=false, so tools that read
Connect's offsets topic read ours): key `["<connector>",{<source partition>}]`, value
`{<source offset>}`, a null value deletes the partition's offset (a tombstone). The JSON
is compact, as Jackson writes it: no spaces, non-ASCII characters as UTF-8, control
characters escaped as `\\u00XX` in upper case.

Stores (`OffsetStore`): `FileOffsetStore` for standalone workers
(`offset.storage.file.filename`) and `KafkaOffsetStore` for distributed ones
(`offset.storage.topic`, read_committed so exactly-once source tasks can write offsets
inside their own transactions: the worker produces `offset_key`/`offset_value` records to
`KafkaOffsetStore.topic` with its transactional producer and the default partitioner).

Concurrency: `get`, `connector_offsets` and `connectors` read an in-memory copy under a
lock and may be called from any thread (a task's OffsetStorageReader); the coroutines run
on the worker's event loop.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from clients.types import ConsumerRecord

from ..api import ConnectError
from .kafka_log import KafkaBasedLog, KeyPositions, LogBacked

__all__ = ["offset_key", "offset_value", "parse_offset_record", "dumps_json", "OffsetStore",
           "FileOffsetStore", "KafkaOffsetStore"]

log = logging.getLogger("strom.connect.offsets")

# Python writes a control character as \u001f, Jackson as \u001F; an escaped backslash
# (an even run of them) before "u" is text, not an escape.
_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")


def dumps_json(obj: Any) -> bytes:
    """`obj` as Kafka's JsonConverter (schemas.enable=false) writes it: compact UTF-8."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if "\\u00" in text:
        text = _HEX_ESCAPE.sub(lambda m: m.group(1) + "\\u00" + m.group(2).upper(), text)
    return text.encode("utf-8")


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The offsets topic's key: `["<connector>",{<partition>}]`."""
    return dumps_json([connector, dict(partition)])


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """The offsets topic's value: the offset as a JSON object; None stays None (tombstone)."""
    return None if offset is None else dumps_json(dict(offset))


def parse_offset_record(key: bytes | None, value: bytes | None
                        ) -> tuple[str, dict[str, Any], dict[str, Any] | None] | None:
    """(connector, partition, offset or None for a tombstone); None, with a warning, for a
    record not of Kafka's format (as Kafka's OffsetUtils skips it)."""
    if key is None:
        log.warning("Ignoring offset partition key with an unexpected null value")
        return None
    try:
        k = json.loads(key)
    except ValueError:
        log.warning("Ignoring offset partition key with unknown serialization. Expected json.")
        return None
    if not isinstance(k, list) or len(k) != 2 or not isinstance(k[0], str) \
            or not isinstance(k[1], dict):
        log.warning("Ignoring offset partition key with an unexpected format: %r", key[:200])
        return None
    if value is None:
        return k[0], k[1], None
    try:
        v = json.loads(value)
    except ValueError:
        log.warning("Ignoring the offset of %r: not JSON", key[:200])
        return None
    if not isinstance(v, dict):
        log.warning("Ignoring the offset of %r: not a JSON object", key[:200])
        return None
    return k[0], k[1], v


def _index(connector: str, partition: Mapping[str, Any]) -> tuple[str, str]:
    # Dicts equal whatever the order of their keys (Kafka compares maps, not bytes).
    return connector, json.dumps(partition, sort_keys=True, separators=(",", ":"))


class OffsetStore:
    """The stored source offsets of every connector, in memory after start().

    `write` returns once the offsets are durable (on disk, or acknowledged by the brokers)
    and visible to `get`; None as an offset deletes the partition's offset."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}

    async def start(self) -> None:
        """Load what is stored."""

    async def stop(self) -> None:
        """Release files and clients (writes already returned are durable)."""

    async def read_to_end(self) -> None:
        """Catch up with writes made elsewhere (other workers, transactions committed)."""

    async def write(self, connector: str,
                    offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
                    ) -> None:
        raise NotImplementedError

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The partition's offset, or None (copy; safe from any thread)."""
        with self._lock:
            found = self._data.get(_index(connector, partition))
        return dict(found[1]) if found is not None else None

    def connector_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every (partition, offset) stored for the connector (KIP-875's GET offsets)."""
        with self._lock:
            return [(dict(p), dict(o)) for (c, _), (p, o) in self._data.items()
                    if c == connector]

    def connectors(self) -> set[str]:
        """The connectors with at least one stored offset."""
        with self._lock:
            return {c for c, _ in self._data}

    def _apply(self, connector: str, partition: Mapping[str, Any],
               offset: Mapping[str, Any] | None) -> None:
        index = _index(connector, partition)
        with self._lock:
            if offset is None:
                self._data.pop(index, None)
            else:
                self._data[index] = (dict(partition), dict(offset))


class FileOffsetStore(OffsetStore):
    """Offsets in a local JSON file (standalone's `offset.storage.file.filename`):
    `{"offsets": [[["<connector>",{partition}], {offset}], ...]}`.

    Every write rewrites the file as a temp file in the same directory, fsyncs it, renames
    it over the old one and fsyncs the directory: a crash leaves the old file or the new
    one, never half of one (a leftover temp file is ignored, and replaced by the next
    write)."""

    def __init__(self, path: str | os.PathLike[str]):
        super().__init__()
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._write_lock: asyncio.Lock | None = None

    async def start(self) -> None:
        """Load the file (none yet: no offsets). ConnectError if it cannot be read."""
        loaded = await asyncio.to_thread(self._load)
        with self._lock:
            self._data = loaded

    def _load(self) -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]]:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise ConnectError(f"Failed to read offsets from {self.path}: {e}") from e
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ConnectError(f"Failed to read offsets from {self.path}: not JSON ({e})") from e
        entries = doc.get("offsets") if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            raise ConnectError(f"Failed to read offsets from {self.path}: no \"offsets\" list")
        out = {}
        for entry in entries:
            try:
                (connector, partition), offset = entry
                ok = (isinstance(connector, str) and isinstance(partition, dict)
                      and isinstance(offset, dict))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                log.warning("%s: ignoring an entry that is not [[connector, {partition}], "
                            "{offset}]: %.200r", self.path, entry)
                continue
            out[_index(connector, partition)] = (partition, offset)
        return out

    async def write(self, connector: str,
                    offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
                    ) -> None:
        """Apply the offsets and rewrite the file; returns once it is on disk."""
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:          # one rewrite at a time, in call order
            with self._lock:
                new = dict(self._data)
            for partition, offset in offsets:
                index = _index(connector, partition)
                if offset is None:
                    new.pop(index, None)
                else:
                    new[index] = (dict(partition), dict(offset))
            body = dumps_json({"offsets": [[[c, p], o] for (c, _), (p, o) in new.items()]})
            try:
                await asyncio.to_thread(self._save, body)
            except OSError as e:
                raise ConnectError(f"Failed to write offsets to {self.path}: {e}") from e
            with self._lock:
                self._data = new

    def _save(self, body: bytes) -> None:
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)                     # the rename itself survives a crash
        finally:
            os.close(dfd)


class KafkaOffsetStore(LogBacked, OffsetStore):
    """Offsets in a compacted topic (distributed's `offset.storage.topic`, Kafka's
    KafkaOffsetBackingStore), read with read_committed. A write is applied to memory once
    acknowledged; records other workers write (or transactions commit) are applied as the
    log consumes them."""

    def __init__(self, client_config: Mapping[str, Any], topic: str, partitions: int = 25,
                 replication_factor: int = -1, *, config_key: str = "offset.storage.topic"):
        super().__init__()
        self.topic = topic
        self._order = KeyPositions()
        self.log = KafkaBasedLog(topic, client_config, partitions, replication_factor,
                                 self._consume, read_committed=True, config_key=config_key,
                                 purpose="source connector offsets")


    def _consume(self, record: ConsumerRecord) -> None:
        key = record.key if isinstance(record.key, bytes) else None
        value = record.value if isinstance(record.value, bytes) else None
        parsed = parse_offset_record(key, value)
        if parsed is None:
            return
        connector, partition, offset = parsed
        if self._order.newer(_index(connector, partition), record.partition, record.offset):
            self._apply(connector, partition, offset)

    async def write(self, connector: str,
                    offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
                    ) -> None:
        """Send one record per partition and wait for all acknowledgements (ConnectError
        if one failed: none of the offsets is applied then)."""
        if not offsets:
            return
        try:
            futures = [await self.log.send_nowait(offset_key(connector, p), offset_value(o))
                       for p, o in offsets]
            written = await asyncio.gather(*futures)
        except ConnectError:
            raise
        except Exception as e:
            raise ConnectError(f"Error writing offsets of {connector} to topic "
                               f"{self.topic}: {e}") from e
        for (partition, offset), md in zip(offsets, written):
            if self._order.newer(_index(connector, partition), md.partition, md.offset):
                self._apply(connector, partition, offset)
