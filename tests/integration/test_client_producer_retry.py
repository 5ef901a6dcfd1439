"""A retried batch that the broker had already written is not written twice.

A proxy between strom's Producer and a real broker forwards everything, except that it
swallows the broker's answers to some Produce requests and cuts the connection instead:
the batch is in the log, the producer never hears so, and resends it on a new connection.
With idempotence (the default) the broker recognises the resent sequence numbers and
answers with the original offsets; the log holds every record once and RecordMetadata
points at the right record. Without idempotence the same run duplicates records, which
shows the test can tell.
"""
from __future__ import annotations

import asyncio
import struct
import threading
from concurrent.futures import wait as wait_futures

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition

from clients.admin import AdminClient
from clients.producer import Producer
from clients.types import NewTopic
from tests.support.broker_process import free_port

pytestmark = pytest.mark.integration

PRODUCE = 0


class AnswerLosingProxy:
    """TCP proxy on its own thread; loses the answer to every `every`-th Produce request
    (at most `times` times) by closing the client's connection when that answer arrives."""

    def __init__(self, listen_port: int, broker_port: int, every: int, times: int):
        self.listen_port, self.broker_port = listen_port, broker_port
        self.every, self.times = every, times
        self.produce_requests = 0
        self.lost = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)

    def start(self) -> "AnswerLosingProxy":
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.listen_port))
        self.ready.set()
        self.loop.run_forever()
        server.close()
        # Its connections end here, on their own loop, not in the collector after it closed.
        pending = asyncio.all_tasks(self.loop)
        for t in pending:
            t.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

    async def _serve(self, c_reader, c_writer) -> None:
        b_reader, b_writer = await asyncio.open_connection("127.0.0.1", self.broker_port)
        doomed: set[int] = set()   # correlation ids whose answers are to be lost

        async def upstream():
            while True:
                head = await c_reader.readexactly(4)
                body = await c_reader.readexactly(struct.unpack(">i", head)[0])
                api_key, _, correlation = struct.unpack_from(">hhi", body)
                if api_key == PRODUCE:
                    self.produce_requests += 1
                    if self.produce_requests % self.every == 0 and self.lost < self.times:
                        doomed.add(correlation)
                b_writer.write(head + body)

        async def downstream():
            while True:
                head = await b_reader.readexactly(4)
                body = await b_reader.readexactly(struct.unpack(">i", head)[0])
                (correlation,) = struct.unpack_from(">i", body)
                if correlation in doomed:
                    self.lost += 1     # written by the broker, never reported
                    return
                c_writer.write(head + body)

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            c_writer.close()
            b_writer.close()


def produce_through_lossy_proxy(broker_factory, idempotent: bool):
    proxy_port = free_port()
    b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    broker_port = b.port
    proxy = AnswerLosingProxy(proxy_port, broker_port, every=7, times=4).start()
    topic, total = "lossy", 3000
    try:
        with AdminClient(bootstrap_servers=b.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 2, 1)])
        with Producer(bootstrap_servers=f"127.0.0.1:{proxy_port}", linger_ms=1, batch_size=2048,
                      enable_idempotence=idempotent, acks="all",
                      max_in_flight_requests_per_connection=5 if idempotent else 1,
                      retry_backoff_ms=20) as p:
            futs = [p.send(topic, b"%d" % i, key=b"k%d" % (i % 11)) for i in range(total)]
            p.flush(60)
            wait_futures(futs, 60)
            failed = [f.exception() for f in futs if f.exception() is not None]
            assert not failed, failed[:3]
            retried = p.retried_batches
        c = CKConsumer({"bootstrap.servers": b.bootstrap, "group.id": "check",
                        "enable.auto.commit": False, "log_level": 0})
        try:
            tps = [CKTopicPartition(topic, p, 0) for p in range(2)]
            ends = {p: c.get_watermark_offsets(CKTopicPartition(topic, p), timeout=10)[1]
                    for p in range(2)}
            c.assign(tps)
            seen = []
            while len(seen) < sum(ends.values()):
                for m in c.consume(500, timeout=5):
                    assert m.error() is None, m.error()
                    seen.append((m.partition(), m.offset(), int(m.value())))
        finally:
            c.close()
    finally:
        proxy.stop()
    return proxy, retried, futs, seen, total


def test_retries_of_written_batches_are_not_duplicated(broker_factory):
    proxy, retried, futs, seen, total = produce_through_lossy_proxy(broker_factory, True)
    numbers = [n for _, _, n in seen]
    print(f"{proxy.lost} answers lost, {retried} batches resent; {len(seen)} records in the "
          f"log for {total} sent")
    assert proxy.lost == 4 and retried >= 4
    assert sorted(numbers) == list(range(total))          # each record exactly once
    at = {(p, o): n for p, o, n in seen}
    for i, f in enumerate(futs):                          # and the offsets reported agree
        md = f.result()
        assert at[(md.partition, md.offset)] == i


def test_without_idempotence_the_same_losses_duplicate(broker_factory):
    proxy, retried, _, seen, total = produce_through_lossy_proxy(broker_factory, False)
    assert proxy.lost == 4 and retried >= 4
    assert len(seen) > total, "the lost answers should have caused duplicates"
