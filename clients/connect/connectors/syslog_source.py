"""strom's syslog source: every UDP syslog datagram (RFC 5424 or RFC 3164) sent to one
socket becomes a JSON-able record of one topic, in the shape spark_jobs' log_levels reads.

The task binds one UDP socket (so one task: `tasks.max` must be 1). A receive loop on the
worker's event loop moves datagrams from the socket into a bounded queue (`queue.max`); when
the queue is full (poll() is not keeping up) further datagrams are dropped and counted.
`poll()` parses up to `batch.size` of them (`syslog_parser`) into records: value the parsed
dict (schemaless: JsonConverter with schemas.enable=false writes it as plain JSON), key the
host (Connect's optional string), timestamp the message's time in ms (the receive time when
it has none). A datagram that is not syslog becomes, under `malformed.policy=record`,
`{"malformed": true, "message": its text, "timestamp": receive time, "host": sender ip,
"reason": why}` so nothing received is lost; under `drop` it is only counted.

UDP cannot be replayed, so records carry no source partition or offset. Counters (the
task's `metrics()`): every datagram the socket delivers is either received (queued) or
dropped; received ones are parsed or malformed once poll() takes them; the kernel's own
drops for the socket (receive buffer full) come from /proc/net/udp{,6}.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import sys
import time
from typing import Any, Mapping

import asyncio_dgram

from ..api import ConnectError, SourceConnector, SourceRecord, SourceTask, Task
from ..config_def import (ConfigDef, ConfigException, ConfigValue, Importance, Type, at_least,
                          between, in_values, non_empty)
from ..data import Schema
from .syslog_parser import FORMATS, SyslogParseError, iso_utc_ms, parse_syslog_timed

__all__ = ["SyslogSourceConnector", "SyslogSourceTask", "CONFIG_DEF"]

log = logging.getLogger(__name__)

TOPIC_CONFIG = "topic"
HOST_CONFIG = "syslog.host"
PORT_CONFIG = "syslog.port"
FORMAT_CONFIG = "syslog.format"
RCVBUF_CONFIG = "syslog.receive.buffer.bytes"
BATCH_SIZE_CONFIG = "batch.size"
QUEUE_MAX_CONFIG = "queue.max"
MALFORMED_POLICY_CONFIG = "malformed.policy"

POLL_WAIT_S = 0.1            # poll() waits this long for a first datagram, then returns None
PROC_DROPS_EVERY_S = 1.0     # /proc/net/udp is read at most this often
DRAIN_MAX = 16384            # datagrams read from the socket per wake of the receive loop
MAX_DATAGRAM = 65535

CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC_CONFIG, Type.STRING, importance=Importance.HIGH, validator=non_empty,
            documentation="The topic the syslog records are written to")
    .define(HOST_CONFIG, Type.STRING, "0.0.0.0", Importance.HIGH,
            "The address the UDP socket binds (0.0.0.0: every IPv4 address, '::': IPv6)")
    .define(PORT_CONFIG, Type.INT, 5514, Importance.HIGH,
            "The UDP port to listen on (0: any free port; the bound one is logged and is the "
            "task's syslog_port metric)", validator=between(0, 65535))
    .define(FORMAT_CONFIG, Type.STRING, "auto", Importance.MEDIUM,
            "The syslog format: auto (RFC 5424 when the PRI is followed by version 1, else "
            "RFC 3164), rfc5424 or rfc3164 (the other format is then malformed)",
            validator=in_values(*FORMATS))
    .define(RCVBUF_CONFIG, Type.INT, 8 * 1024 * 1024, Importance.LOW,
            "The socket's receive buffer (SO_RCVBUF), as far as the kernel allows: what "
            "absorbs a burst while the worker is busy", validator=at_least(0))
    .define(BATCH_SIZE_CONFIG, Type.INT, 2000, Importance.LOW,
            "The most records one poll() returns", validator=at_least(1))
    .define(QUEUE_MAX_CONFIG, Type.INT, 100_000, Importance.LOW,
            "Datagrams buffered between the socket and poll(); when full, further datagrams "
            "are dropped and counted (syslog_datagrams_dropped_total)", validator=at_least(1))
    .define(MALFORMED_POLICY_CONFIG, Type.STRING, "record", Importance.MEDIUM,
            "What becomes of a datagram that is not syslog: record (a record with "
            "\"malformed\": true, its text and the reason) or drop (counted only)",
            validator=in_values("record", "drop")))


def _check_tasks_max(props: Mapping[str, str]) -> str | None:
    raw = props.get("tasks.max", "1")
    try:
        if int(str(raw).strip()) == 1:
            return None
    except ValueError:
        return None      # the worker's own validation reports a non-number
    return "The syslog source listens on one UDP socket: tasks.max must be 1"


class SyslogSourceConnector(SourceConnector):
    """One task listening on `syslog.host`:`syslog.port` (UDP) and writing to `topic`."""

    KAFKA_NAME = "io.strom.connect.syslog.SyslogSourceConnector"

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)      # raises ConfigException naming a bad key
        problem = _check_tasks_max(props)
        if problem:
            raise ConfigException("tasks.max", props.get("tasks.max"), problem)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return SyslogSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]      # one socket, one task

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        values = super().validate(props)
        problem = _check_tasks_max(props)
        if problem:
            values.append(ConfigValue("tasks.max", props.get("tasks.max"), errors=[problem]))
        return values


class SyslogSourceTask(SourceTask):
    """Receives datagrams on the event loop; start/poll/stop are `async` (never block).

    `metrics()` may be called from any thread: it reads counters and at most once a second
    /proc/net/udp."""

    def __init__(self) -> None:
        self.port = 0
        self._received = 0
        self._parsed = 0
        self._malformed = 0
        self._dropped = 0
        self._socket_drops = 0
        self._drops_read_at = 0.0
        self.socket_drops_every_s = PROC_DROPS_EVERY_S
        self._inode: int | None = None
        self._family = socket.AF_INET
        self._queue: collections.deque[tuple[bytes, str, float]] = collections.deque()
        self._stream: Any = None
        self._receiver: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None

    async def start(self, props: dict[str, str]) -> None:
        config = CONFIG_DEF.parse(props)
        self._topic: str = config[TOPIC_CONFIG]
        self._format: str = config[FORMAT_CONFIG]
        self._batch_size: int = config[BATCH_SIZE_CONFIG]
        self._queue_max: int = config[QUEUE_MAX_CONFIG]
        self._keep_malformed = config[MALFORMED_POLICY_CONFIG] == "record"
        sock = await _bound_socket(config[HOST_CONFIG], config[PORT_CONFIG],
                                   config[RCVBUF_CONFIG])
        self._family = sock.family
        self._inode = os.fstat(sock.fileno()).st_ino
        self.port = sock.getsockname()[1]
        rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        try:
            self._stream = await asyncio_dgram.from_socket(sock)
        except BaseException:
            sock.close()
            raise
        self._ready = asyncio.Event()
        self._receiver = asyncio.create_task(self._receive(sock),
                                             name=f"syslog-udp-{self.port}")
        log.info("Syslog source listening on UDP %s port %d (receive buffer %d bytes), "
                 "writing to %s", config[HOST_CONFIG], self.port, rcvbuf, self._topic)

    async def _receive(self, sock: socket.socket) -> None:
        """Socket -> queue, until the stream is closed. Never blocks on poll().

        asyncio's datagram transport reads one datagram per turn of the event loop, some
        30k a second at best; so once the stream hands over a datagram, the datagrams the
        kernel already holds are read straight from the (non-blocking) socket, up to
        DRAIN_MAX, before waiting on the stream again (which lets the loop run). Only this
        coroutine reads while the stream's queue is empty, so the order is kept."""
        assert self._stream is not None and self._ready is not None
        recv, queue, ready, limit = self._stream.recv, self._queue, self._ready, self._queue_max
        recvfrom = sock.recvfrom
        while True:
            try:
                data, addr = await recv()
            except asyncio_dgram.TransportClosed:
                return
            except OSError as e:          # an ICMP error reported on the socket: not fatal
                log.debug("Syslog socket error: %s", e)
                continue
            now = time.time()
            taken = dropped = 0
            while True:
                if len(queue) < limit:
                    queue.append((data, addr[0], now))
                    taken += 1
                else:
                    dropped += 1
                if taken + dropped >= DRAIN_MAX:
                    break
                try:
                    data, addr = recvfrom(MAX_DATAGRAM)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as e:
                    log.debug("Syslog socket error: %s", e)
                    break
            self._received += taken
            self._dropped += dropped
            if taken and not ready.is_set():
                ready.set()

    async def poll(self) -> list[SourceRecord] | None:
        """Up to batch.size records; None when nothing arrived within ~100 ms."""
        receiver, ready = self._receiver, self._ready
        if receiver is None or ready is None:
            raise ConnectError("SyslogSourceTask.poll() before start()")
        # The worker's loop converts and sends a whole batch between two of its turns, and
        # at 20k datagrams/s that outlasts the socket's buffer: give the receive loop its
        # turns now (one for the transport to see the socket readable, one for the receiver
        # to drain it), so the kernel's queue is emptied before every batch. The receiver
        # stays the socket's only reader: the order is kept.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        queue = self._queue
        if not queue:
            if receiver.done():
                error = None if receiver.cancelled() else receiver.exception()
                raise ConnectError(f"syslog receive loop ended: {error!r}")
            ready.clear()
            try:
                await asyncio.wait_for(ready.wait(), POLL_WAIT_S)
            except asyncio.TimeoutError:
                return None
        records = []
        topic, fmt, key_schema = self._topic, self._format, Schema.OPTIONAL_STRING_SCHEMA
        for _ in range(min(len(queue), self._batch_size)):
            data, ip, received_at = queue.popleft()
            try:
                ts_ms, value = parse_syslog_timed(data, received_at, ip, fmt)
            except SyslogParseError as e:
                self._malformed += 1
                if not self._keep_malformed:
                    continue
                ts_ms = int(received_at * 1000)
                value = {"malformed": True, "message": data.decode("utf-8", "replace"),
                         "timestamp": iso_utc_ms(ts_ms), "host": ip, "reason": e.reason}
            else:
                self._parsed += 1
            records.append(SourceRecord(topic, None, key_schema, value["host"], None, value,
                                        ts_ms))
        return records

    async def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()
        if self._receiver is not None:
            self._receiver.cancel()
            try:
                await self._receiver
            except asyncio.CancelledError:
                pass

    def metrics(self) -> dict[str, float]:
        """Counters since start (Prometheus names; the worker prefixes kafka_connect_)."""
        now = time.monotonic()
        if now - self._drops_read_at >= self.socket_drops_every_s:
            self._drops_read_at = now
            self._socket_drops = socket_drops(self._inode, self._family)
        return {"syslog_datagrams_received_total": self._received,
                "syslog_datagrams_parsed_total": self._parsed,
                "syslog_datagrams_malformed_total": self._malformed,
                "syslog_datagrams_dropped_total": self._dropped,
                "syslog_socket_drops_total": self._socket_drops,
                "syslog_port": self.port}


async def _bound_socket(host: str, port: int, rcvbuf: int) -> socket.socket:
    """A non-blocking UDP socket bound to host:port, its receive buffer set first (the
    kernel caps SO_RCVBUF at net.core.rmem_max; SO_RCVBUFFORCE passes it when privileged)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM,
                                   flags=socket.AI_PASSIVE)
    family, type_, proto, _, addr = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        if rcvbuf > 0:
            # Python's socket module has no SO_RCVBUFFORCE; Linux's value is 33.
            force = getattr(socket, "SO_RCVBUFFORCE", 33 if sys.platform.startswith("linux") else None)
            try:
                if force is None:
                    raise OSError("no SO_RCVBUFFORCE")
                sock.setsockopt(socket.SOL_SOCKET, force, rcvbuf)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.bind(addr)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def socket_drops(inode: int | None, family: int = socket.AF_INET) -> int:
    """The kernel's drop count of the UDP socket with this inode (the `drops` column of
    /proc/net/udp or udp6); 0 when it cannot be read."""
    if inode is None:
        return 0
    wanted = str(inode)
    name = "/proc/net/udp6" if family == socket.AF_INET6 else "/proc/net/udp"
    try:
        with open(name) as f:
            next(f, None)                       # the header line
            for line in f:
                cols = line.split()
                # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
                if len(cols) >= 13 and cols[9] == wanted:
                    return int(cols[12])
    except (OSError, ValueError):
        pass
    return 0
