"""v3's POST /v3/clusters/{cluster_id}/topics/{topic_name}/records: produce records, one
request at a time or streaming, as Confluent's REST Proxy does (its ProduceAction).

The body is concatenated JSON records (clients/rest/records_codec.py says what a record
holds and what its delivery report looks like). Every record gets a report, in the order
the records came:
- streaming (`Transfer-Encoding: chunked`): 200 as soon as the request is accepted, then
  the reports as their records are acknowledged, for as long as the client writes. The
  body is read as it arrives (json_stream.py), at most MAX_PENDING records in flight.
  After streaming.connection.max.duration.ms no more records are read: the ones read are
  reported, then Confluent's 408 report, and the answer ends; a client that does not read
  its reports then has CLOSE_GRACE_S to take them before its connection is dropped.
- a body with a length: read whole (MAX_BODY_BYTES at most, else 413). One record is
  answered with its report under the report's own status (200, or the error's: 400, 404,
  413, 422, ...), as Confluent Cloud documents the route; several with 200 and their
  reports one after another.
A record that cannot be produced (bad base64, unknown partition, over max.request.size)
gets an error report in its place and the others go on, as in Confluent's proxy. Text
that is not JSON ends the body with a 400 report after the ones before it: no next record
can be found in it. Before any record: 415 (Content-Type), 406 (Accept), 401/403
(credentials), and 404 with code 40403 for a topic that does not exist (looked up first,
since a Kafka producer waits max.block.ms for a topic it cannot find).

The cluster id in the path is repeated in the reports, not checked (Confluent Platform's
proxy does not; Confluent Cloud does).
"""
from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections import deque
from typing import Any, Union

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from clients.aio.errors import KafkaClientError
from clients.aio.producer import AsyncProducer
from clients.protocol.errors import KafkaError
from clients.rest.bodies import JSON, negotiate, require_content_type
from clients.rest.config import RestProxyConfig
from clients.rest.errors import RestError, bad_request, from_kafka
from clients.rest.json_stream import JsonStreamReader
from clients.rest.kafka import ClientPool, KafkaClients, Principal
from clients.rest.records_codec import (EMPTY_BODY, INVALID_PAYLOAD, TOPIC_NOT_FOUND_MESSAGE,
                                        ReportRenderer, error_for, error_report, parse_record)
from clients.types import RecordMetadata

__all__ = ["V3RecordsResource", "MAX_PENDING", "RareLog"]

log = logging.getLogger("strom.rest.v3.records")

PATH = "/v3/clusters/{cluster_id}/topics/{topic_name}/records"
# Streaming: records read whose report is not written yet. Reading stops above this (the
# client is not reading its reports, or the cluster is slow) and goes on below half of it.
MAX_PENDING = 8192
# The largest JSON text of one record (and of a body with a length): the server's limit.
MAX_BODY_BYTES = 64 * 1024 * 1024
TOPIC_RECHECK_S = 30.0          # a topic found is looked up again after this long
MAX_KNOWN_TOPICS = 10_000
# Streaming: how long the reports (the 408 last) may take to be written once the time
# limit passed, before the connection is dropped (a client that stopped reading).
CLOSE_GRACE_S = 5.0
UNEXPECTED_LOG_INTERVAL_S = 60.0
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)       # SO_LINGER on, 0 s

# A record in flight: (its delivery future, key type, value type); or the error it got.
_Entry = Union[tuple["asyncio.Future[RecordMetadata]", "str | None", "str | None"], RestError]


class RareLog:
    """Stack traces of unexpected errors (bugs), at most one per `interval_s`: a request
    of many records that each hit the same bug must not flood the log. The ones left out
    are counted, and the count is said with the next one logged."""

    def __init__(self, logger: logging.Logger, interval_s: float,
                 clock: Any = time.monotonic):
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._next = 0.0
        self._skipped = 0

    def exception(self, message: str, exc: BaseException) -> None:
        now = self.clock()
        if now < self._next:
            self._skipped += 1
            return
        self._next = now + self.interval_s
        skipped, self._skipped = self._skipped, 0
        if skipped:
            message += f" (and {skipped} more unexpected errors since the last one logged)"
        self.logger.error("%s", message, exc_info=exc)


_unexpected = RareLog(log, UNEXPECTED_LOG_INTERVAL_S)
# What reading a request's body raises when the client is at fault, not strom.
_BODY_ERRORS = (ConnectionError, asyncio.IncompleteReadError, web.RequestPayloadError,
                web.PayloadAccessError, HttpProcessingError)


class V3RecordsResource:
    """The produce route. Records go through the request principal's AsyncProducer
    (ClientPool); the topics known to exist are remembered per principal for
    TOPIC_RECHECK_S. Single event loop; requests are independent of each other."""

    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config
        self._topics: dict[tuple[Principal, str], float] = {}   # -> monotonic time known until

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self.produce)]

    async def close(self) -> None:
        self._topics.clear()

    async def produce(self, request: web.Request) -> web.StreamResponse:
        require_content_type(request, (JSON,))
        negotiate(request, (JSON,))
        topic = request.match_info["topic_name"]
        clients = await self.pool.for_request(request)
        await self._require_topic(clients, topic)
        run = _ProduceRun(clients.producer, topic,
                          ReportRenderer(request.match_info["cluster_id"], topic),
                          self.config.streaming_connection_max_duration_ms / 1000)
        if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
            return await run.stream(request)
        return await run.whole(request)

    async def _require_topic(self, clients: KafkaClients, topic: str) -> None:
        """404/40403 unless the topic exists (as the principal may see it)."""
        known = (clients.principal, topic)
        now = time.monotonic()
        if self._topics.get(known, 0.0) > now:
            return
        try:
            await clients.admin.describe_topics([topic])
        except KafkaError as e:
            if e.name == "UNKNOWN_TOPIC_OR_PARTITION":
                raise RestError(404, 40403, TOPIC_NOT_FOUND_MESSAGE) from None
            raise from_kafka(e) from e
        except KafkaClientError as e:
            raise from_kafka(e) from e
        if len(self._topics) >= MAX_KNOWN_TOPICS:
            self._topics.clear()
        self._topics[known] = now + TOPIC_RECHECK_S


class _ProduceRun:
    """One request's records: sent to the producer in the order they came, their reports
    written in that order (`entries` holds those not reported yet)."""

    def __init__(self, producer: AsyncProducer, topic: str, renderer: ReportRenderer,
                 max_stream_s: float):
        self.producer = producer
        self.topic = topic
        self.renderer = renderer
        self.max_stream_s = max_stream_s
        self.reader = JsonStreamReader(MAX_BODY_BYTES)
        self.entries: deque[_Entry] = deque()
        self._first = True
        self._more = asyncio.Event()    # streaming: entries were added, or reading ended
        self._room = asyncio.Event()    # streaming: entries fell below MAX_PENDING / 2
        self._expired = False           # streaming: open longer than max_stream_s
        self._idle = False              # streaming: reading waits (for the body or for room)
        self._abandon: asyncio.TimerHandle | None = None    # streaming: drops the connection
        # Waiting for a record's delivery: a future woken by a done-callback (cheaper per
        # record than asyncio.wait's sets and callbacks).
        self._waiter: asyncio.Future[None] | None = None
        self._wake = self._delivered

    async def send(self, values: list[Any]) -> None:
        """Hand the records to the producer; a record refused gets its error in place."""
        if self._first and values:
            self._first = False
            if type(values[0]) is list:     # a leading JSON array: its items are records,
                values = values[0] + values[1:]     # as Jackson's MappingIterator reads it
        send, topic, entries = self.producer.send, self.topic, self.entries
        for value in values:
            try:
                r = parse_record(value)
                fut = await send(topic, r.value, r.key, r.partition, r.timestamp_ms, r.headers)
            except Exception as e:
                if not isinstance(e, (RestError, KafkaError, KafkaClientError)):
                    _unexpected.exception(f"producing a record to {topic} failed", e)
                entries.append(error_for(e))
                continue
            entries.append((fut, r.key_type, r.value_type))

    def end_of_text(self) -> None:
        """After the body's last record: if its text was not JSON, that is the last report."""
        err = self.reader.error
        if err is None:
            return
        if err.too_large:
            self.entries.append(RestError(413, 413, f"Request Entity Too Large: {err}"))
        else:
            self.entries.append(bad_request(f"Bad Request: Error processing message: {err}"))

    def _delivered(self, _: Any) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _delivery(self, fut: "asyncio.Future[RecordMetadata]") -> None:
        """Wait until `fut` (not done) is; its outcome is not raised."""
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        fut.add_done_callback(self._wake)
        await waiter

    def report(self, entry: _Entry) -> tuple[int, str]:
        """(status, report text) of an entry whose outcome is known."""
        if type(entry) is tuple:
            fut, key_type, value_type = entry
            try:
                return 200, self.renderer.delivered(fut.result(), key_type, value_type)
            except asyncio.CancelledError:
                err = RestError(500, 50002, "the record's delivery was cancelled")
            except Exception as e:
                err = error_for(e)
        else:
            assert isinstance(entry, RestError)
            err = entry
        return err.status, error_report(err)

    # ------------------------------------------------------------------ a body with a length

    async def whole(self, request: web.Request) -> web.Response:
        body = await request.read()     # over the server's client_max_size: 413
        values = self.reader.feed(body)
        values += self.reader.finish()
        await self.send(values)
        self.end_of_text()
        if not self.entries:
            raise RestError(422, INVALID_PAYLOAD, EMPTY_BODY)
        reports = []
        status = 200
        for entry in self.entries:
            if type(entry) is tuple and not entry[0].done():
                await self._delivery(entry[0])
            status, text = self.report(entry)
            reports.append(text)
        if len(reports) > 1:
            status = 200
        return web.Response(body="".join(reports).encode(), status=status, content_type=JSON)

    # ------------------------------------------------------------------ streaming

    async def stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200)
        resp.content_type = JSON
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        reading = asyncio.ensure_future(self._read(request))
        timer = asyncio.get_running_loop().call_later(self.max_stream_s, self._expire, reading,
                                                      request)
        try:
            await self._write(resp, reading)
            await resp.write_eof()
        except ConnectionError:
            log.debug("streaming produce to %s: the client went away", self.topic)
        finally:
            timer.cancel()
            if self._abandon is not None:
                self._abandon.cancel()
            if not reading.done():
                reading.cancel()
            await asyncio.wait((reading,))
            if not reading.cancelled() and reading.exception() is not None:
                log.error("streaming produce to %s: reading failed", self.topic,
                          exc_info=reading.exception())
        return resp

    def _expire(self, reading: "asyncio.Future[None]", request: web.Request) -> None:
        """streaming.connection.max.duration.ms passed: read no more records (at once when
        reading waits; else once the records read are sent, none lost in between), and
        drop the connection if the reports are not all written CLOSE_GRACE_S later."""
        self._expired = True
        if self._idle:
            reading.cancel()
        self._abandon = asyncio.get_running_loop().call_later(CLOSE_GRACE_S, self._drop, request)

    def _drop(self, request: web.Request) -> None:
        """The client does not take its reports (the writer waits for it): reset the
        connection, which ends the write with ConnectionResetError. abort(), not close(),
        which would wait for the unwritten reports to be sent first; and with SO_LINGER 0,
        so that the socket closes with a reset the client sees at once, rather than the
        kernel holding the reports it has (megabytes) and trying to deliver them."""
        transport = request.transport
        if transport is None:
            return
        log.info("streaming produce to %s: the client took no reports %.0f s after the time "
                 "limit: dropping the connection", self.topic, CLOSE_GRACE_S)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            except OSError:
                pass
        transport.abort()

    async def _read(self, request: web.Request) -> None:
        content, reader, entries = request.content, self.reader, self.entries
        try:
            while not self._expired:
                self._idle = True
                data = await content.readany()
                self._idle = False
                values = reader.feed(data) if data else reader.finish()
                if values:
                    await self.send(values)
                    self._more.set()
                if not data or reader.error is not None:
                    self.end_of_text()
                    break
                self._idle = True
                while len(entries) >= MAX_PENDING:
                    self._room.clear()
                    await self._room.wait()
                self._idle = False
        except _BODY_ERRORS as e:       # the client went away, or its chunked body is broken
            log.debug("streaming produce to %s: reading the body failed: %r", self.topic, e)
        except Exception as e:          # a bug: the client is told the body stopped here
            _unexpected.exception(f"streaming produce to {self.topic}: reading failed", e)
            entries.append(RestError(500, 500, "Internal Server Error"))
        finally:
            if self._expired:           # Confluent's answer, after the reports before it
                entries.append(RestError(408, 408, "Streaming connection open for longer than "
                                         "allowed: Connection will be closed."))
            self._more.set()

    async def _write(self, resp: web.StreamResponse, reading: "asyncio.Future[None]") -> None:
        """Write the reports in order, as many at a time as are ready, until the body
        ended and every record is reported."""
        entries, report = self.entries, self.report
        while True:
            if not entries:
                if reading.done():
                    return
                self._more.clear()
                await self._more.wait()
                continue
            head = entries[0]
            if type(head) is tuple and not head[0].done():
                await self._delivery(head[0])
            out = []
            while entries:
                entry = entries[0]
                if type(entry) is tuple and not entry[0].done():
                    break
                entries.popleft()
                out.append(report(entry)[1])
            await resp.write("".join(out).encode())
            if len(entries) < MAX_PENDING // 2:
                self._room.set()
