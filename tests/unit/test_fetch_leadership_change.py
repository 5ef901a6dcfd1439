"""A fetch parked in the purgatory when its partition's leadership moves answers
NOT_LEADER_OR_FOLLOWER at once, as Kafka's DelayedFetch does, so its client looks for the
new leader; it used to go on waiting (and reading a log it no longer led) until max_wait_ms.
It still answers at max_wait_ms when nothing happens."""
from __future__ import annotations

import asyncio
from pathlib import Path

from broker.replication.partition import FollowerState
from broker.server.network import Response
from clients.protocol.errors import Code
from clients.protocol.messages import API_BY_NAME
from tests.support.in_process_broker import request_frame as _frame, standalone_broker


def _fetch(replica_id: int, offset: int) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": 3000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _with_followers(broker, *follower_ids: int):
    """Partition t-0 led here with in-sync followers that have fetched nothing yet: an
    append no longer moves the high watermark by itself."""
    p = broker.replicas.get("t", 0)
    p.isr = [p.broker_id, *follower_ids]
    p.replicas = list(p.isr)
    for f in follower_ids:
        p.followers[f] = FollowerState(f, log_end_offset=p.log.log_end_offset)
    return p


def test_a_parked_fetch_answers_at_max_wait_and_at_once_when_leadership_goes(tmp_path: Path) -> None:
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
            body = b"".join(bytes(c) for c in response.chunks)[5:]   # correlation id, tags
            answer = API_BY_NAME["Fetch"].decode_response(body, 12)
            assert answer.responses[0].partitions[0].error_code == Code.NOT_LEADER_OR_FOLLOWER
    asyncio.run(main())
