"""The Fetcher's use of fetch sessions and its retry pacing, against a scripted broker
connection (no sockets): a session error on an incremental fetch starts a new session at
once, on a full fetch it backs off; an out-of-range answer for a partition whose buffer
is not drained waits instead of asking again in a loop."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

from clients.aio.fetcher import Fetcher
from clients.config import resolve
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from clients.types import TopicPartition

TP = TopicPartition("t", 0)


class Obj(dict):
    __getattr__ = dict.__getitem__


class ScriptedBroker:
    """Answers each Fetch with `answer(body)`; records every request body."""

    def __init__(self, answer):
        self.answer = answer
        self.bodies: list[dict] = []

    def version_for(self, api):
        return 12

    async def request(self, api, body, version=None, timeout=None):
        self.bodies.append(body)
        await asyncio.sleep(0.001)
        return self.answer(body)


def fetcher(broker: ScriptedBroker) -> Fetcher:
    async def connection(node):
        return broker
    client = NS(retry_backoff=0.2, request_timeout=30,
                cluster=NS(leader_for=lambda t, p: 1, partition=lambda t, p: NS(leader_epoch=0)),
                metadata=NS(add_topics=lambda ts: None, request_update=lambda: None),
                connection=connection)
    return Fetcher(client, resolve("consumer", bootstrap_servers="x:1", fetch_max_wait_ms=10))


def answer(records: bytes = b"", error: int = 0, session_id: int = 7, top: int = 0,
           hw: int = 0) -> Obj:
    p = Obj(partition_index=0, error_code=error, high_watermark=hw, last_stable_offset=hw,
            log_start_offset=0, records=records, aborted_transactions=None)
    return Obj(error_code=top, session_id=session_id,
               responses=[Obj(topic="t", partitions=[p])] if not top else [])


async def run(f: Fetcher, seconds: float) -> None:
    f.assign([TP])
    f.seek(TP, 0)
    f.start()
    await asyncio.sleep(seconds)
    await f.close()


def test_session_errors_restart_the_session_at_once_only_after_an_incremental_fetch():
    state = {"n": 0}

    def script(body):
        state["n"] += 1
        if body["session_epoch"] == 0:
            return answer(session_id=7)
        # Every incremental fetch: the broker lost the session.
        return answer(top=Code.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    b = ScriptedBroker(script)
    asyncio.run(run(fetcher(b), 0.5))
    epochs = [x["session_epoch"] for x in b.bodies]
    # full, incremental (refused), full at once, incremental (refused), ... : alternating,
    # not stuck on incremental ones, and the full ones carry the old id (closing it).
    assert epochs[:4] == [0, 1, 0, 1]
    assert all(x["session_id"] == 7 for x in b.bodies[2::2])

    def always_refused(body):
        return answer(top=Code.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    b2 = ScriptedBroker(always_refused)
    asyncio.run(run(fetcher(b2), 0.5))
    # Full fetches refused: the error path with its backoff (0.2 s), not a spin.
    assert len(b2.bodies) <= 4, len(b2.bodies)


def test_out_of_range_behind_an_undrained_buffer_waits():
    batch = build_batch([Record(None, b"v%d" % i) for i in range(3)])

    def script(body):
        offset = body["topics"][0]["partitions"][0]["fetch_offset"] if body["topics"] else None
        if offset == 0:
            return answer(records=batch, hw=3)
        return answer(error=Code.OFFSET_OUT_OF_RANGE, hw=1)    # truncated meanwhile
    b = ScriptedBroker(script)
    asyncio.run(run(fetcher(b), 0.6))                            # nobody polls: buffer stays
    assert len(b.bodies) <= 6, len(b.bodies)                     # was thousands a second
