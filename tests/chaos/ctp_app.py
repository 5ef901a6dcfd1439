"""A consume-transform-produce application with confluent-kafka transactions, run as its own
process by test_txn_exactly_once.py (which kills it with SIGKILL at random moments).

Reads `in` (read_committed, group `ctp`), writes for each input record one output record to
the same partition of `out` whose value names the input record and this attempt:
`<partition>:<offset>:<attempt>`, commits the input offsets in the same transaction. After
each commit or abort returns it appends `{"attempt": ..., "status": ...}` to the attempts
log (a kill between the return and the line leaves the outcome unknown, which the checker
allows). Exits 0 once the group's position reaches `--end` on every partition."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--end", type=int, required=True, help="records per input partition")
    ap.add_argument("--attempts-log", required=True)
    ap.add_argument("--max-batch", type=int, default=200, help="input records per transaction")
    ap.add_argument("--pace", type=float, default=0.0, help="seconds to pause after each commit")
    a = ap.parse_args()
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe(["in"])
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": "ctp-app", "log_level": 0,
                         "transaction.timeout.ms": 20000, "socket.connection.setup.timeout.ms": 1000})
    producer.init_transactions(120)
    log = open(a.attempts_log, "a", buffering=1)
    positions: dict[int, int] = {}
    while True:
        msgs = [m for m in consumer.consume(a.max_batch, 1.0) if m.error() is None]
        if not msgs:
            committed = consumer.committed([TopicPartition("in", p) for p in range(a.partitions)], 30)
            if all(tp.offset >= a.end for tp in committed):
                return 0
            continue
        attempt = uuid.uuid4().hex[:12]
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce("out", f"{m.partition()}:{m.offset()}:{attempt}".encode(), partition=m.partition())
                positions[m.partition()] = m.offset() + 1
            offsets = [TopicPartition("in", p, o) for p, o in positions.items()]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(120)
            log.write(json.dumps({"attempt": attempt, "status": "committed"}) + "\n")
            if a.pace:
                time.sleep(a.pace)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                producer.abort_transaction(120)
                log.write(json.dumps({"attempt": attempt, "status": "aborted"}) + "\n")
            else:
                print(f"ctp_app: fatal {err}; exiting for a restart", file=sys.stderr)
                os._exit(3)
            # Rewind to the committed offsets: the aborted records are read again.
            committed = consumer.committed([TopicPartition("in", p) for p in range(a.partitions)], 30)
            for tp in committed:
                consumer.seek(TopicPartition("in", tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            positions.clear()


if __name__ == "__main__":
    sys.exit(main())
