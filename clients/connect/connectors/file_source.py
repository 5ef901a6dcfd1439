"""Kafka's FileStreamSourceConnector: each line of a file (or of standard input) becomes a
record of one topic.

Lines end at "\\n", "\\r" or "\\r\\n", as Kafka splits them; a last line without its end is
held until the rest of it is written (a final "\\r" too, since a "\\n" may follow). Each
record's value is the line (UTF-8, bad bytes replaced) with Connect's STRING schema, no key;
its source partition is {"filename": path} and its offset {"position": the byte offset just
after the line}, so a restarted task resumes exactly where the last stored offset says
(KIP-618: exactly-once capable when reading a file). Standard input has no offsets.

The task follows a growing file: poll() returns what has been appended, or None after a short
idle wait. A file that does not exist yet is waited for; a file truncated below the read
position, or replaced by another file (a new inode), is read again from its start.
"""
from __future__ import annotations

import logging
import os
import select
import sys
import threading
import time
from typing import Any, Mapping

from ..api import (ConnectError, ExactlyOnceSupport, SourceConnector, SourceRecord,
                   SourceTask, Task)
from ..config_def import ConfigDef, ConfigException, Importance, Type, non_empty
from ..data import Schema

__all__ = ["FileStreamSourceConnector", "FileStreamSourceTask", "CONFIG_DEF"]

log = logging.getLogger(__name__)

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TASK_BATCH_SIZE_CONFIG = "batch.size"
DEFAULT_TASK_BATCH_SIZE = 2000
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"


def _single_topic(key: str, value: Any) -> None:
    non_empty(key, value)
    if "," in value:
        raise ConfigException(key, value, "'topic' in FileStreamSourceConnector configuration "
                                          "requires definition of a single topic")


CONFIG_DEF = (ConfigDef()
              .define(FILE_CONFIG, Type.STRING, None, Importance.HIGH,
                      "Source filename. If not specified, the standard input will be used")
              .define(TOPIC_CONFIG, Type.STRING, documentation="The topic to publish data to",
                      importance=Importance.HIGH, validator=_single_topic)
              .define(TASK_BATCH_SIZE_CONFIG, Type.INT, DEFAULT_TASK_BATCH_SIZE, Importance.LOW,
                      "The maximum number of records the source task can read from the file "
                      "each time it is polled"))


class FileStreamSourceConnector(SourceConnector):
    """One task reading `file` (standard input when absent or empty) into `topic`."""

    KAFKA_NAME = "org.apache.kafka.connect.file.FileStreamSourceConnector"

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)      # raises ConfigException naming a bad key
        self._props = dict(props)
        log.info("Starting file source connector reading from %s",
                 props.get(FILE_CONFIG) or "standard input")

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]      # only one input stream makes sense

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def exactly_once_support(self, props: Mapping[str, str]) -> str | None:
        # a real file's byte positions make re-reading exact (as long as it is only appended
        # to); standard input has no offsets
        if props.get(FILE_CONFIG):
            return ExactlyOnceSupport.SUPPORTED
        return ExactlyOnceSupport.UNSUPPORTED


class FileStreamSourceTask(SourceTask):
    """Reads the file in big chunks in the task's thread; poll() blocks at most IDLE_WAIT_S.
    stop() may be called from another thread: it cuts an idle wait short."""

    CHUNK_BYTES = 1 << 20
    IDLE_WAIT_S = 0.1

    def start(self, props: dict[str, str]) -> None:
        config = CONFIG_DEF.parse(props)
        self._filename: str | None = config[FILE_CONFIG] or None
        self._topic: str = config[TOPIC_CONFIG]
        self._batch_size = max(1, config[TASK_BATCH_SIZE_CONFIG])
        self._partition = {FILENAME_FIELD: self._filename} if self._filename else None
        self._fd: int | None = None
        self._pos = 0            # byte offset just after the last line handed out
        self._read_pos = 0       # byte offset of the next byte to read
        self._pending: list[bytes] = []    # complete lines read, each with its line end
        self._next = 0                     # index of the first one not handed out
        self._partial = b""                # an incomplete last line
        self._missing_logged = False
        self._stopping = threading.Event()
        self._lock = threading.Lock()      # poll's reading against stop's close
        if self._filename is None:
            self._fd = sys.stdin.fileno()
            log.info("File source task reading from standard input")

    def poll(self) -> list[SourceRecord] | None:
        """Up to batch.size records, or None when no complete line arrived in IDLE_WAIT_S."""
        with self._lock:
            if self._stopping.is_set():
                return None
            if self._fd is None and not self._open():
                records: list[SourceRecord] = []
            else:
                records = self._take()
        if records:
            return records
        self._stopping.wait(self.IDLE_WAIT_S)
        return None

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._fd is not None and self._filename is not None:
                os.close(self._fd)
            self._fd = None

    # ------------------------------------------------------------------ reading

    def _open(self) -> bool:
        assert self._filename is not None
        path = self._filename
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not self._missing_logged:
                log.warning("Couldn't find file %s for FileStreamSourceTask, waiting for it to "
                            "be created", path)
                self._missing_logged = True
            return False
        except OSError as e:
            raise ConnectError(f"Error while trying to open file {path}: {e}") from e
        try:
            position = self._stored_position()
        except BaseException:
            os.close(fd)
            raise
        size = os.fstat(fd).st_size
        if position > size:
            log.warning("File %s is shorter (%d bytes) than the stored position %d: it was "
                        "truncated or replaced; reading it from the start", path, size, position)
            position = 0
        elif position:
            log.info("Resuming %s from the stored position %d", path, position)
        self._fd = fd
        self._reset(position)
        self._missing_logged = False
        log.debug("Opened %s for reading", path)
        return True

    def _stored_position(self) -> int:
        context = getattr(self, "context", None)
        if context is None:
            return 0
        offset = context.offset_storage_reader.offset(self._partition or {})
        if not offset or offset.get(POSITION_FIELD) is None:
            return 0
        position = offset[POSITION_FIELD]
        if not isinstance(position, int) or isinstance(position, bool):
            raise ConnectError("Offset position is the incorrect type")
        return position

    def _reset(self, position: int) -> None:
        self._pos = self._read_pos = position
        self._pending = []
        self._next = 0
        self._partial = b""

    def _take(self) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        batch = self._batch_size
        now_ms = int(time.time() * 1000)
        topic, partition = self._topic, self._partition
        schema = Schema.STRING_SCHEMA
        pos = self._pos
        while len(out) < batch:
            if self._next >= len(self._pending):
                self._pos = pos
                if not self._fill():
                    break
                pos = self._pos         # a truncated or replaced file starts again at 0
            end = min(len(self._pending), self._next + batch - len(out))
            lines = self._pending[self._next:end]
            self._next = end
            append = out.append
            if partition is None:
                for raw in lines:
                    append(SourceRecord(topic, None, None, None, schema,
                                        raw.rstrip(b"\r\n").decode("utf-8", "replace"),
                                        now_ms, (), None, None))
            else:
                for raw in lines:
                    pos += len(raw)
                    # positional: topic, kafka_partition, key_schema, key, value_schema,
                    # value, timestamp, headers, source_partition, source_offset
                    append(SourceRecord(topic, None, None, None, schema,
                                        raw.rstrip(b"\r\n").decode("utf-8", "replace"),
                                        now_ms, (), partition, {POSITION_FIELD: pos}))
        self._pos = pos
        return out

    def _fill(self) -> bool:
        """Read until at least one more complete line is pending; False when the input has
        nothing more for now."""
        while True:
            data = self._read()
            if not data:
                return False
            self._read_pos += len(data)
            parts = (self._partial + data).splitlines(keepends=True)
            # bytes.splitlines breaks at \n, \r and \r\n only, Kafka's line ends; a last part
            # not ending in \n is incomplete (one ending in \r may yet become \r\n)
            self._partial = b"" if parts[-1].endswith(b"\n") else parts.pop()
            if parts:
                self._pending = parts
                self._next = 0
                return True

    def _read(self) -> bytes:
        fd = self._fd
        assert fd is not None
        if self._filename is None:
            readable, _, _ = select.select([fd], [], [], 0)
            return os.read(fd, self.CHUNK_BYTES) if readable else b""
        data = os.pread(fd, self.CHUNK_BYTES, self._read_pos)
        if not data and self._rotated():
            data = os.pread(self._fd or fd, self.CHUNK_BYTES, self._read_pos)
        return data

    def _rotated(self) -> bool:
        """At the end of the file: start again from 0 when the file was truncated below what
        was read, or when its name now leads to another file."""
        assert self._filename is not None and self._fd is not None
        try:
            named = os.stat(self._filename)
        except FileNotFoundError:
            return False        # moved away and not yet replaced: the old file may still grow
        current = os.fstat(self._fd)
        if (named.st_ino, named.st_dev) != (current.st_ino, current.st_dev):
            try:
                fd = os.open(self._filename, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return False
            log.warning("File %s was replaced by another file; reading the new one from its "
                        "start", self._filename)
            os.close(self._fd)
            self._fd = fd
        elif current.st_size < self._read_pos:
            log.warning("File %s was truncated to %d bytes below the read position %d; reading "
                        "it from the start", self._filename, current.st_size, self._read_pos)
        else:
            return False
        self._reset(0)
        return True
