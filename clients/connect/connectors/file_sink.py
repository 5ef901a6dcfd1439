"""Kafka's FileStreamSinkConnector: each record's value becomes one line of a file (or of
standard output).

A value is written as Java's `println(value)` prints it: a string as is, null as "null",
true/false in lower case, maps as {k=v, ...} and lists as [a, b]; bytes are decoded as UTF-8
(Java would print an array's identity, of no use to anyone). The file is opened for
appending and created if missing; flush() makes what put() wrote durable (flush + fsync),
which is what lets the worker commit the records' offsets.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Any, BinaryIO

from clients.types import TopicPartition

from ..api import ConnectError, SinkConnector, SinkRecord, SinkTask, Task
from ..config_def import ConfigDef, Importance, Type

__all__ = ["FileStreamSinkConnector", "FileStreamSinkTask", "CONFIG_DEF", "as_text"]

log = logging.getLogger(__name__)

FILE_CONFIG = "file"

CONFIG_DEF = ConfigDef().define(
    FILE_CONFIG, Type.STRING, None, Importance.HIGH,
    "Destination filename. If not specified, the standard output will be used")


class FileStreamSinkConnector(SinkConnector):
    """`max.tasks` tasks, all appending to `file` (standard output when absent or empty).
    `topics` / `topics.regex` are the worker's sink keys, validated by the worker."""

    KAFKA_NAME = "org.apache.kafka.connect.file.FileStreamSinkConnector"

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF


def as_text(value: Any) -> str:
    """A value as Java's String.valueOf prints it (bytes decoded as UTF-8)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{as_text(k)}={as_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(as_text(v) for v in value) + "]"
    return str(value)


class FileStreamSinkTask(SinkTask):
    """Writes each put() batch with one write into a buffered file; the worker calls its
    methods one at a time (from the task's thread)."""

    BUFFER_BYTES = 1 << 20

    def start(self, props: dict[str, str]) -> None:
        filename = CONFIG_DEF.parse(props)[FILE_CONFIG] or None
        self._filename: str | None = filename
        self._out: BinaryIO
        if filename is None:
            self._out = sys.stdout.buffer
        else:
            try:
                self._out = open(filename, "ab", buffering=self.BUFFER_BYTES)
            except OSError as e:
                raise ConnectError(f"Couldn't find or create file '{filename}' for "
                                   f"FileStreamSinkTask: {e}") from e
        self._closed = False

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        text = "\n".join([v if isinstance(v, str) else as_text(v)
                          for v in [r.value for r in records]])
        self._out.write(text.encode("utf-8", "replace") + b"\n")

    def flush(self, current_offsets: dict[TopicPartition, int]) -> None:
        self._out.flush()
        if self._filename is not None:
            os.fsync(self._out.fileno())

    def stop(self) -> None:
        if self._filename is not None and not self._closed:
            self._closed = True
            self._out.close()
        elif self._filename is None:
            self._out.flush()
