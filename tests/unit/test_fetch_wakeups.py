"""A parked Fetch is woken by every change of a partition it waits on (an append, a high
watermark move), as Kafka's purgatory checks every delayed fetch of the partition; only a
change it can read makes it read its partitions again and build an answer (Kafka's
DelayedFetch.tryComplete). A consumer reads up to the high watermark, so an append the
followers have not fetched yet is nothing to it; a follower reads up to the log end, so a
high watermark move is nothing to it. At 50 MB/s with rf=3 those were about half of all
wake-ups, each a full read of the fetch's partitions."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.replication.partition import FollowerState
from broker.server.handlers import fetch as fetch_handler
from broker.server.network import Response
from clients.protocol.records import Record, build_batch
from tests.support.in_process_broker import request_frame as _frame, standalone_broker


def _fetch(replica_id: int, offset: int) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": 3000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


_PRODUCE = {"acks": 1, "timeout_ms": 5000, "topic_data": [
    {"name": "t", "partition_data": [{"index": 0, "records": build_batch([Record(None, b"x" * 64)])}]}]}


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """One entry per full read of a fetch's partitions."""
    seen: list[int] = []
    read = fetch_handler._FetchPlan.read

    def counting(self):
        seen.append(1)
        return read(self)
    monkeypatch.setattr(fetch_handler._FetchPlan, "read", counting)
    return seen


def _with_followers(broker, *follower_ids: int):
    """Partition t-0 led here with in-sync followers that have fetched nothing yet: an
    append no longer moves the high watermark by itself."""
    p = broker.replicas.get("t", 0)
    p.isr = [p.broker_id, *follower_ids]
    p.replicas = list(p.isr)
    for f in follower_ids:
        p.followers[f] = FollowerState(f, log_end_offset=p.log.log_end_offset)
    return p


def test_a_consumers_fetch_reads_again_only_when_the_high_watermark_moves(tmp_path: Path, reads) -> None:
    async def main() -> None:
        async with standalone_broker(tmp_path / "logs", {"t": 1}) as (broker, dispatch, conn):
            loop = asyncio.get_running_loop()
            p = _with_followers(broker, 91)
            waiting = dispatch(_frame("Fetch", _fetch(-1, 0), 12), conn)
            assert asyncio.iscoroutine(waiting)
            task = loop.create_task(waiting)
            await asyncio.sleep(0.05)                    # parked
            parked = len(reads)
            assert isinstance(dispatch(_frame("Produce", _PRODUCE, 9), conn), Response)
            assert p.log.log_end_offset == 1 and p.log.high_watermark == 0
            await asyncio.sleep(0.05)
            assert not task.done()
            assert len(reads) == parked, "woken by an append it cannot read yet, it read again"
            started = loop.time()
            broker.replicas.record_follower_fetch(p, 91, 1)     # the follower has it: HW 1
            response = await asyncio.wait_for(task, 5)
            assert isinstance(response, Response) and response.size > 100   # the record came
            assert loop.time() - started < 1.0
            assert len(reads) == parked + 1
    asyncio.run(main())


def test_a_followers_fetch_reads_again_only_when_the_log_end_moves(tmp_path: Path, reads) -> None:
    async def main() -> None:
        async with standalone_broker(tmp_path / "logs", {"t": 1}) as (broker, dispatch, conn):
            loop = asyncio.get_running_loop()
            p = _with_followers(broker, 91, 92)
            assert isinstance(dispatch(_frame("Produce", _PRODUCE, 9), conn), Response)
            broker.replicas.record_follower_fetch(p, 92, 1)
            assert p.log.high_watermark == 0              # 91 has not fetched it yet
            waiting = dispatch(_frame("Fetch", _fetch(92, 1), 12), conn)   # 92 at the log end
            assert asyncio.iscoroutine(waiting)
            task = loop.create_task(waiting)
            await asyncio.sleep(0.05)
            parked = len(reads)
            broker.replicas.record_follower_fetch(p, 91, 1)     # HW 1: nothing new for 92
            assert p.log.high_watermark == 1
            await asyncio.sleep(0.05)
            assert not task.done()
            assert len(reads) == parked, "woken by a high watermark move, it read again"
            assert isinstance(dispatch(_frame("Produce", _PRODUCE, 9), conn), Response)
            response = await asyncio.wait_for(task, 5)
            assert isinstance(response, Response) and response.size > 100
            assert len(reads) == parked + 1
    asyncio.run(main())


def test_a_parked_fetch_still_answers_at_max_wait_and_when_leadership_goes(tmp_path: Path, reads) -> None:
    async def main() -> None:
        async with standalone_broker(tmp_path / "logs", {"t": 1}) as (broker, dispatch, conn):
            loop = asyncio.get_running_loop()
            p = _with_followers(broker, 91)
            body = _fetch(-1, 0)
            body["max_wait_ms"] = 200
            started = loop.time()
            response = await asyncio.wait_for(loop.create_task(dispatch(_frame("Fetch", body, 12), conn)), 5)
            assert isinstance(response, Response) and 0.15 < loop.time() - started < 2.0
            task = loop.create_task(dispatch(_frame("Fetch", _fetch(-1, 0), 12), conn))
            await asyncio.sleep(0.05)
            p.make_follower(7, p.leader_epoch + 1, [7], [7, p.broker_id], p.partition_epoch)
            broker.replicas.purgatory.notify(("t", 0))
            response = await asyncio.wait_for(task, 1.0)   # answered, not left to max_wait_ms
            assert isinstance(response, Response)
    asyncio.run(main())
