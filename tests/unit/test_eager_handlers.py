"""The broker's eager APIs (broker.main.EAGER_API_KEYS) are dispatched outside any task,
inside the listener's buffer_updated, by a plain call that answers at once or returns a
coroutine to wait in. Run the real Produce and Fetch handlers that way, through the real
Dispatcher of an in-process broker: anything that needs a current task (asyncio.timeout,
current_task()) in the plain call would fail here."""
from __future__ import annotations

import asyncio
from pathlib import Path

from broker.main import EAGER_API_KEYS
from broker.server.network import Response
from clients.protocol.messages import API_BY_KEY
from clients.protocol.records import Record, build_batch
from tests.support.in_process_broker import request_frame as _frame, standalone_broker


def test_produce_and_fetch_answer_outside_a_task_or_return_a_coroutine_to_wait_in(tmp_path: Path) -> None:
    assert {API_BY_KEY[k].name for k in EAGER_API_KEYS} == {"Produce", "Fetch"}

    async def main() -> None:
        async with standalone_broker(tmp_path / "logs", {"t": 2}) as (broker, dispatch, conn):
            batch = build_batch([Record(None, b"v%d" % i) for i in range(3)])
            loop = asyncio.get_running_loop()

            async def in_a_plain_callback(frame: memoryview) -> object:
                # A loop callback, as buffer_updated is: no task is current there.
                fut = loop.create_future()

                def call() -> None:
                    try:
                        assert asyncio.current_task() is None
                        fut.set_result(dispatch(frame, conn))
                    except BaseException as e:
                        fut.set_exception(e)
                loop.call_soon(call)
                return await asyncio.wait_for(fut, 5)

            produce = {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
            response = await in_a_plain_callback(_frame("Produce", produce, 9))
            assert isinstance(response, Response) and response.size > 0
            # acks=all appends at once, then waits for replication in the coroutine it returns
            # (which _FrameProtocol hands to a task).
            produce["acks"] = -1
            waiting = await in_a_plain_callback(_frame("Produce", produce, 9))
            assert asyncio.iscoroutine(waiting), waiting
            assert broker.replicas.get("t", 0).log.log_end_offset == 6   # appended already
            response = await asyncio.wait_for(loop.create_task(waiting), 5)
            assert isinstance(response, Response) and response.size > 0
            fetch = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                     "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                     "topics": [{"topic": "t", "partitions": [
                         {"partition": p, "current_leader_epoch": -1, "fetch_offset": off,
                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                         for p, off in ((0, 0), (1, 0))]}],
                     "forgotten_topics_data": [], "rack_id": ""}
            response = await in_a_plain_callback(_frame("Fetch", fetch, 12))
            assert isinstance(response, Response) and response.size > 0
            # Nothing to read on partition 1 at its end: the fetch waits in the purgatory,
            # in the coroutine it returns, and answers empty after max_wait_ms.
            fetch["topics"][0]["partitions"] = [fetch["topics"][0]["partitions"][1]]
            fetch["max_wait_ms"] = 50
            waiting = await in_a_plain_callback(_frame("Fetch", fetch, 12))
            assert asyncio.iscoroutine(waiting), waiting
            assert sum(dispatch.stats.requests.values()) == 3    # the parked fetch still waits
            response = await asyncio.wait_for(loop.create_task(waiting), 5)
            assert isinstance(response, Response)
            # The Dispatcher turns a handler's exception (RuntimeError: "Timeout should be
            # used inside a task") into UNKNOWN_SERVER_ERROR: every answer must have been clean.
            assert {code for (_, code) in dispatch.stats.errors} == {0}
            assert sum(dispatch.stats.requests.values()) == 4
    asyncio.run(main())


def test_an_append_between_the_fetchs_call_and_its_task_wakes_it(tmp_path: Path) -> None:
    """The coroutine a parked Fetch returns starts in a task one event-loop pass later; an
    append in that pass (another connection's produce) must not go unnoticed until
    max_wait_ms."""
    async def main() -> None:
        async with standalone_broker(tmp_path / "logs", {"t": 1}) as (broker, dispatch, conn):
            loop = asyncio.get_running_loop()
            fetch = {"replica_id": -1, "max_wait_ms": 3000, "min_bytes": 1, "max_bytes": 1 << 20,
                     "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                     "topics": [{"topic": "t", "partitions": [
                         {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                     "forgotten_topics_data": [], "rack_id": ""}
            waiting = dispatch(_frame("Fetch", fetch, 12), conn)
            assert asyncio.iscoroutine(waiting), waiting            # nothing to read: it waits
            produce = {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": build_batch([Record(None, b"x")])}]}]}
            assert isinstance(dispatch(_frame("Produce", produce, 9), conn), Response)
            started = loop.time()
            response = await asyncio.wait_for(loop.create_task(waiting), 5)
            assert isinstance(response, Response) and response.size > 100    # the record came
            assert loop.time() - started < 1.0, "woken only by max_wait_ms"
    asyncio.run(main())
