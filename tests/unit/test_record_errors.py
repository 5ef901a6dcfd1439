"""KIP-467: a batch with keyless records for a compacted topic is refused with INVALID_RECORD,
and the answer names each keyless record (record_errors: its index, why) with Kafka's
LogValidator message, so a client can tell them from the good records of the batch."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.validation import RecordValidationError, scan_batches, validate_record_keys
from clients.protocol.compression import GZIP
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.unit.test_handler_authorization import produce_body, run, secured

KEYS = [b"a", None, b"c", None, None, b"f"]      # records 1, 3 and 4 have no key
WHY = "Compacted topic cannot accept message without key in topic partition c-0."


def _batch() -> bytes:
    return build_batch([Record(k, b"v") for k in KEYS], compression=GZIP)


def test_every_keyless_record_is_named() -> None:
    data = memoryview(_batch())
    with pytest.raises(RecordValidationError) as e:
        validate_record_keys(data, scan_batches(data), "c-0")
    assert e.value.code == Code.INVALID_RECORD
    assert e.value.record_errors == [(1, WHY), (3, WHY), (4, WHY)]
    assert e.value.message == (
        "One or more records have been rejected due to 3 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{WHY}'), "
        f"RecordError(batchIndex=3, message='{WHY}'), RecordError(batchIndex=4, message='{WHY}')]")


def test_produce_answers_record_errors_from_v8(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path, {"c": 1}) as (broker, _, _, admin):
            await broker.topic_admin.set_configs("c", {"cleanup.policy": "compact"}, False)
            for version, errors in ((8, [1, 3, 4]), (7, [])):
                r = await admin.ask("Produce", produce_body(("c", 0), records=_batch()), version)
                p = r.responses[0].partition_responses[0]
                assert p.error_code == Code.INVALID_RECORD
                assert [e.batch_index for e in p.record_errors] == errors
                assert all(e.batch_index_error_message == WHY for e in p.record_errors)
                if version >= 8:
                    assert p.error_message.startswith("One or more records have been rejected")
            assert broker.replicas.maybe_get("c", 0).log.log_end_offset == 0   # nothing written
    run(main())
