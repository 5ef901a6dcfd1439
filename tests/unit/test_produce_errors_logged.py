"""A produce refused because the producer and the broker disagree on its sequence is worth a
line in the broker log, with what the broker remembers (Kafka logs "Error processing append
operation on partition" for it); routine refusals (no such partition, acks=all without
enough replicas) are answered without one."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from clients.protocol.records import Record, build_batch
from tests.support.in_process_broker import answer, request_frame, standalone_broker

PID = 77


def _produce_frame(partition: int, records: bytes) -> memoryview:
    return request_frame("Produce", {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": partition, "records": records}]}]}, 9)


def _batch(seq: int, n: int = 2) -> bytes:
    return build_batch([Record(None, b"v")] * n, producer_id=PID, producer_epoch=0,
                       base_sequence=seq)


def test_out_of_order_sequence_is_logged_and_routine_refusals_are_not(tmp_path: Path, caplog) -> None:
    async def main() -> dict:
        async with standalone_broker(tmp_path / "logs", {"t": 1}) as (_, dispatch, conn):
            await answer(dispatch, _produce_frame(0, _batch(0)), conn)
            await answer(dispatch, _produce_frame(7, _batch(0)), conn)      # no such partition
            with caplog.at_level(logging.INFO):
                await answer(dispatch, _produce_frame(0, _batch(5)), conn)  # 2..4 never came
            return dict(dispatch.stats.errors)

    errors = asyncio.run(main())
    assert errors.get(("Produce", 45)) == 1 and errors.get(("Produce", 3)) == 1, errors
    logged = [r for r in caplog.records if r.name.startswith("broker.server")]
    assert len(logged) == 1, caplog.text
    assert logged[0].levelno == logging.WARNING
    assert "Error processing append operation on partition t-0" in logged[0].getMessage()
    assert "sequence 5..6 does not follow 1 (its last batches here: 0..1 at 0)" in logged[0].getMessage()
