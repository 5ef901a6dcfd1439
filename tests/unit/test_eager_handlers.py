"""The broker's eager APIs (broker.main.EAGER_API_KEYS) run their first step outside any
task, inside the listener's buffer_updated. Run the real Produce and Fetch handlers that
way, through the real Dispatcher of an in-process broker: anything that needs a current
task (asyncio.timeout, current_task()) before the first wait would fail here."""
from __future__ import annotations

import asyncio
from pathlib import Path

from broker.main import EAGER_API_KEYS
from broker.server.network import Response, _Resumed
from clients.protocol.messages import API_BY_KEY
from clients.protocol.records import Record, build_batch
from tests.support.in_process_broker import request_frame as _frame, standalone_broker


def _outside_any_task(coro) -> tuple[Response | None, object]:
    """The first step, as _FrameProtocol._dispatch takes it: (response, None) if it
    finished, (None, what it waits on) if not."""
    try:
        waiting_on = coro.send(None)
    except StopIteration as done:
        return done.value, None
    return None, waiting_on


def test_produce_and_fetch_take_their_first_step_outside_a_task(tmp_path: Path) -> None:
    assert {API_BY_KEY[k].name for k in EAGER_API_KEYS} == {"Produce", "Fetch"}

    async def main() -> None:
        async with standalone_broker(tmp_path / "logs", {"t": 2}) as (broker, dispatch, conn):
            batch = build_batch([Record(None, b"v%d" % i) for i in range(3)])

            async def in_a_plain_callback(frame: memoryview) -> tuple[Response | None, object]:
                # A loop callback, as buffer_updated is: no task is current there.
                fut = asyncio.get_running_loop().create_future()

                def step() -> None:
                    try:
                        assert asyncio.current_task() is None
                        fut.set_result(_outside_any_task(dispatch(frame, conn)))
                    except BaseException as e:
                        fut.set_exception(e)
                asyncio.get_running_loop().call_soon(step)
                return await asyncio.wait_for(fut, 5)

            produce = {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
            response, waits = await in_a_plain_callback(_frame("Produce", produce, 9))
            assert waits is None and response is not None and response.size > 0
            # acks=all waits for replication (a gather of waits), then a task carries it on,
            # as _FrameProtocol does.
            produce["acks"] = -1
            frame = _frame("Produce", produce, 9)
            coro = dispatch(frame, conn)
            loop = asyncio.get_running_loop()
            first: asyncio.Future = loop.create_future()
            def first_step() -> None:
                try:
                    first.set_result(_outside_any_task(coro))
                except BaseException as e:
                    first.set_exception(e)
            loop.call_soon(first_step)
            response, waits = await asyncio.wait_for(first, 5)
            assert response is None and isinstance(waits, asyncio.Future), (response, waits)
            waits._asyncio_future_blocking = False
            response = await asyncio.wait_for(loop.create_task(_Resumed(coro, waits)), 5)
            assert response is not None and response.size > 0
            assert broker.replicas.get("t", 0).log.log_end_offset == 6
            fetch = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                     "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                     "topics": [{"topic": "t", "partitions": [
                         {"partition": p, "current_leader_epoch": -1, "fetch_offset": off,
                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                         for p, off in ((0, 0), (1, 0))]}],
                     "forgotten_topics_data": [], "rack_id": ""}
            response, waits = await in_a_plain_callback(_frame("Fetch", fetch, 12))
            assert waits is None and response is not None and response.size > 0
            # Nothing to read on partition 1 at its end: the fetch parks in the purgatory.
            fetch["topics"][0]["partitions"] = [fetch["topics"][0]["partitions"][1]]
            fetch["max_wait_ms"] = 50
            response, waits = await in_a_plain_callback(_frame("Fetch", fetch, 12))
            assert response is None and isinstance(waits, asyncio.Future)
            # The Dispatcher turns a handler's exception (RuntimeError: "Timeout should be
            # used inside a task") into UNKNOWN_SERVER_ERROR: every answer must have been clean.
            assert {code for (_, code) in dispatch.stats.errors} == {0}
            assert sum(dispatch.stats.requests.values()) == 3    # the parked fetch still waits
    asyncio.run(main())
