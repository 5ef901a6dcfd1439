"""Calls send_offsets_to_transaction right after the group coordinator librdkafka cached has
left the cluster's metadata, under the CallWatchdog (test_send_offsets_hang.py runs it).

1. A transaction of offsets of `--group` (librdkafka caches the group's coordinator);
   prints `probe: committed`.
2. Waits for a line on stdin: meanwhile the test kills that coordinator and the controller
   fences it.
3. Fetches metadata (the dead broker is gone from it: librdkafka decommissions it), waits
   for that broker's thread to wind down, then calls send_offsets_to_transaction again
   with `--call-timeout`.
Exits 0 once that call returned (with offsets sent or an error), call_watchdog.EXIT_CODE if
the watchdog had to end it."""
from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.chaos.call_watchdog import CallWatchdog


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--call-timeout", type=float, required=True)
    ap.add_argument("--debug", default="", help="librdkafka debug contexts, logged to stderr (e.g. eos,broker)")
    a = ap.parse_args()
    logging = {"log_level": 7, "debug": a.debug} if a.debug else {"log_level": 0}
    watchdog = CallWatchdog("probe")
    # Not subscribed: the offsets are committed as a group without members (generation -1).
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "log_level": 0})
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": a.transactional_id, **logging})
    producer.init_transactions(30)

    def transaction(offset: int) -> None:
        # Offsets only: a record to produce could make the producer connect to a partition
        # leader, and that broker's state change would wake the lookup (see above).
        producer.begin_transaction()
        with watchdog.call("send_offsets_to_transaction", a.call_timeout):
            producer.send_offsets_to_transaction([TopicPartition("in", 0, offset)],
                                                 consumer.consumer_group_metadata(), a.call_timeout)
        producer.commit_transaction(30)

    transaction(1)
    print("probe: committed", flush=True)
    sys.stdin.readline()
    producer.list_topics(timeout=10)
    # The decommissioned broker's thread changes state once or twice more as it ends, and
    # any broker's state change wakes a waiting coordinator lookup.
    time.sleep(1.0)
    started = time.monotonic()
    try:
        transaction(2)
        outcome = "sent the offsets"
    except KafkaException as e:
        outcome = f"failed: {e.args[0]}"
    print(f"probe: the second transaction ended after {time.monotonic() - started:.1f} s: {outcome}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
