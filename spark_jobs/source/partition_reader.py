"""Executor side: read the records of one offset range [start, end) of one topic-partition
from the partition's leader and yield them as Arrow record batches.

Runs inside a Spark Python worker, in `DataSourceReader.read` / `DataSourceStreamReader.read`:
a fresh process or a reused one, with nothing but the pickled `RangePartition`. It opens its
own `KafkaClient` (strom's asyncio core) on a private event loop, finds the leader, and runs
a Fetch loop: the next Fetch is sent as soon as the batch headers of the current response
say where it ends, so the broker prepares it while this process decodes (one request
pipelined). Records are decoded column-wise (`ColumnBuilder`) and handed to Spark in
batches of about `_ROWS_PER_BATCH` rows.

Only committed data is read: the broker answers up to the high watermark, or up to the last
stable offset with `kafka.isolation.level=read_committed` (records of aborted transactions
are then dropped). Leader moves and lost connections are retried with fresh metadata until
`request.timeout.ms`.

Data loss (the range starts below the log start offset because retention removed records,
or the log ends before `end`): with failOnDataLoss=true the read fails with a message naming
the topic-partition and the offsets; with false it skips ahead to what is still there.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncGenerator, AsyncIterator, Iterator

import pyarrow as pa

from clients.aio import BrokerConnection, KafkaClient, KafkaConnectionError, KafkaTimeoutError
from clients.config import resolve
from clients.protocol.errors import Code, for_code
from clients.protocol.read_committed import aborted_filter
from clients.protocol.schema import Struct
from clients.protocol.records import iter_batch_headers

from .arrow_records import ColumnBuilder
from .options import SourceOptions

__all__ = ["read_range", "DataLossError", "data_loss_message"]

log = logging.getLogger("strom.spark.reader")

_ROWS_PER_BATCH = 65_536
_DEFAULT_PARTITION_FETCH_BYTES = 4 << 20
_FETCH_MAX_VERSION = 12            # topic names on the wire
_RETRY_CODES = {Code.NOT_LEADER_OR_FOLLOWER, Code.FENCED_LEADER_EPOCH, Code.UNKNOWN_LEADER_EPOCH,
                Code.UNKNOWN_TOPIC_OR_PARTITION, Code.LEADER_NOT_AVAILABLE,
                Code.REPLICA_NOT_AVAILABLE, Code.KAFKA_STORAGE_ERROR, Code.OFFSET_NOT_AVAILABLE,
                Code.NOT_ENOUGH_REPLICAS}


class DataLossError(RuntimeError):
    """Records a query needs are gone (retention, deleted topic, truncated log)."""


def data_loss_message(detail: str) -> str:
    """Spark's wording for data loss, so users find the option to change."""
    return (f"{detail}. Some data may have been lost because they are not available in Kafka "
            f"any more; either the data was aged out by Kafka or the topic may have been "
            f"deleted before all the data in the topic was processed. If you don't want your "
            f"query to fail on such cases, set the source option \"failOnDataLoss\" to "
            f"\"false\".")


def read_range(opts: SourceOptions, topic: str, partition: int, start: int,
               end: int) -> Iterator[pa.RecordBatch]:
    """Record batches of topic-partition records with start <= offset < end (blocking)."""
    if start >= end:
        return
    loop = asyncio.new_event_loop()
    agen = _RangeReader(opts, topic, partition).batches(start, end)
    try:
        while True:
            try:
                batch = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                break
            yield batch
    finally:
        try:
            loop.run_until_complete(agen.aclose())
        finally:
            loop.close()


class _RangeReader:
    def __init__(self, opts: SourceOptions, topic: str, partition: int):
        self.opts = opts
        self.topic = topic
        self.partition = partition
        self.tp = f"{topic}-{partition}"
        params = dict(opts.client_config)
        params.setdefault("max.partition.fetch.bytes", _DEFAULT_PARTITION_FETCH_BYTES)
        params.setdefault("client.id", "strom-spark-executor")
        self.config = resolve("consumer", {"bootstrap.servers": opts.bootstrap, **params})
        self.client = KafkaClient(self.config)
        self.read_committed = self.config["isolation.level"] == "read_committed"
        self.builder = ColumnBuilder(topic, partition, opts.include_headers,
                                     verify_crc=self.config["check.crcs"])
        self.timeout = self.client.request_timeout

    async def batches(self, start: int, end: int) -> AsyncGenerator[pa.RecordBatch, None]:
        await self.client.start()
        try:
            async for batch in self._fetch_loop(start, end):
                yield batch
        finally:
            await self.client.close()

    async def _leader_connection(self, deadline: float) -> tuple[BrokerConnection, int]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                cluster = await self.client.metadata.refresh([self.topic])
                info = cluster.partition(self.topic, self.partition)
                if info is not None and info.leader >= 0:
                    conn = await self.client.connection(info.leader)
                    return conn, info.leader_epoch
                if cluster.topic(self.topic) is not None and info is None:
                    raise DataLossError(data_loss_message(
                        f"Partition {self.tp} does not exist any more"))
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                if loop.time() >= deadline:
                    raise
                log.info("no connection to the leader of %s yet: %s", self.tp, e)
            if loop.time() >= deadline:
                raise KafkaTimeoutError(f"no leader for {self.tp} within {self.timeout}s")
            await asyncio.sleep(self.client.retry_backoff)

    def _fetch(self, conn: BrokerConnection, epoch: int, offset: int) -> "asyncio.Task[Any]":
        version = min(conn.version_for("Fetch"), _FETCH_MAX_VERSION)
        body = {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
                "max_bytes": self.config["fetch.max.bytes"],
                "isolation_level": 1 if self.read_committed else 0,
                "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": self.topic, "partitions": [{
                    "partition": self.partition, "fetch_offset": offset,
                    "current_leader_epoch": epoch, "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.config["max.partition.fetch.bytes"]}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        return asyncio.get_running_loop().create_task(
            conn.request("Fetch", body, version=version, timeout=self.timeout + 0.1))

    async def _log_start(self, conn: BrokerConnection) -> int:
        body = {"replica_id": -1, "isolation_level": 1 if self.read_committed else 0,
                "topics": [{"name": self.topic, "partitions": [
                    {"partition_index": self.partition, "current_leader_epoch": -1,
                     "timestamp": -2}]}]}
        resp = await conn.request("ListOffsets", body, timeout=self.timeout)
        p = resp.topics[0].partitions[0]
        if p.error_code:
            raise for_code(p.error_code)(f"ListOffsets {self.tp}")
        return p.offset

    async def _fetch_loop(self, start: int, end: int) -> AsyncIterator[pa.RecordBatch]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        conn, epoch = await self._leader_connection(deadline)
        position = start
        pending: tuple[int, asyncio.Task[Any]] | None = None
        builder = self.builder
        try:
            while position < end:
                if pending is None or pending[0] != position:
                    if pending is not None:
                        pending[1].cancel()
                    pending = (position, self._fetch(conn, epoch, position))
                task = pending[1]
                pending = None
                try:
                    resp = await task
                    if resp.get("error_code"):
                        raise for_code(resp.error_code)(f"Fetch {self.tp}")
                    p = resp.responses[0].partitions[0]
                except (KafkaConnectionError, KafkaTimeoutError) as e:
                    if loop.time() >= deadline:
                        raise
                    log.info("fetch %s at %d failed: %s; retrying", self.tp, position, e)
                    await asyncio.sleep(self.client.retry_backoff)
                    conn, epoch = await self._leader_connection(deadline)
                    continue
                code = p.error_code
                if code in _RETRY_CODES:
                    if loop.time() >= deadline:
                        raise for_code(code)(f"Fetch {self.tp} at offset {position}")
                    await asyncio.sleep(self.client.retry_backoff)
                    conn, epoch = await self._leader_connection(deadline)
                    continue
                if code == Code.OFFSET_OUT_OF_RANGE:
                    position = await self._out_of_range(conn, position, end)
                    continue
                if code:
                    raise for_code(code)(f"Fetch {self.tp} at offset {position}")
                buf = p.records
                next_offset = position
                if buf:
                    for _, h in iter_batch_headers(buf):
                        last = h.base_offset + h.last_offset_delta + 1
                        if last > next_offset:
                            next_offset = last
                if next_offset < end and next_offset > position:
                    pending = (next_offset, self._fetch(conn, epoch, next_offset))
                if next_offset > position:
                    deadline = loop.time() + self.timeout
                    if self.read_committed and p.get("aborted_transactions"):
                        self._add_committed(buf, position, end, p.aborted_transactions)
                    else:
                        builder.add_record_set(buf, position, end)
                    position = next_offset
                    if len(builder) >= _ROWS_PER_BATCH:
                        yield builder.to_record_batch()
                    continue
                # Nothing at `position`: the log ends (or stops being stable) before `end`.
                stable = p.last_stable_offset if self.read_committed else p.high_watermark
                if loop.time() >= deadline:
                    self._lost(f"Cannot fetch records in [{position}, {end}) of {self.tp}: "
                               f"the log ends at {stable}")
                    break
                await asyncio.sleep(self.client.retry_backoff)
            if len(builder):
                yield builder.to_record_batch()
        finally:
            if pending is not None:
                pending[1].cancel()

    async def _out_of_range(self, conn: BrokerConnection, position: int, end: int) -> int:
        """OFFSET_OUT_OF_RANGE at `position`: retention removed it (or the log was cut)."""
        earliest = await self._log_start(conn)
        if position < earliest:
            self._lost(f"Cannot fetch offset {position} of {self.tp} (the earliest offset "
                       f"is {earliest}; the query needs [{position}, {end}))")
            log.warning("%s: offsets [%d, %d) are gone; skipping to %d (failOnDataLoss=false)",
                        self.tp, position, min(earliest, end), earliest)
            return min(earliest, end)
        self._lost(f"Cannot fetch offset {position} of {self.tp}: it is past the end of the "
                   f"log (the query needs [{position}, {end}))")
        return end

    def _lost(self, detail: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(detail))

    def _add_committed(self, buf: bytes | memoryview, position: int, end: int,
                       aborted: list[Struct]) -> None:
        """read_committed with aborted transactions in range: the slow, per-record path."""
        self.builder.add_records(r for r in aborted_filter(buf, position, aborted)
                                 if r.offset < end)
