"""One consumer-group member as its own OS process, for the group integration tests.

    python -m tests.support.groups2_consumer --client kafka-python|aiokafka|confluent \
        --bootstrap HOST:PORT --topic T --group G --log PATH [--strategy default|range] ...

It subscribes to the topic, consumes, and appends to its log file (flushed after every
batch, before any commit covering it, so the file survives kill -9):

    <partition> <offset> <value>          one line per record processed
    # <unix-time> started
    # <unix-time> assign <p>,<p>,...      from the ConsumerRebalanceListener (full assignment)
    # <unix-time> revoke <p>,<p>,...
    # <unix-time> commit-try <p>:<o>,...  before a synchronous commit of next-offsets
    # <unix-time> commit <p>:<o>,...      after it succeeded
    # <unix-time> commit-failed <error>
    # <unix-time> closing                 SIGTERM seen: final commit, then close
    # <unix-time> closed                  after a clean shutdown

It commits explicit next-offsets synchronously every --commit-every records (and, when idle,
after --commit-idle-s seconds), and commits what it has processed of revoked partitions in
the revoke callback, so the only records that can be processed twice are a member's
uncommitted tail when it dies. SIGTERM: commit, close (leave the group), exit 0.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time


class Log:
    def __init__(self, path: str):
        self.f = open(path, "a", buffering=1 << 16)

    def event(self, what: str) -> None:
        self.f.write(f"# {time.time():.3f} {what}\n")
        self.f.flush()

    def records(self, recs: list[tuple[int, int, bytes | None]]) -> None:
        if recs:
            self.f.write("".join(f"{p} {o} {(v or b'').decode()}\n" for p, o, v in recs))
            self.f.flush()


def fmt_parts(parts) -> str:
    return ",".join(str(p) for p in sorted(parts))


def fmt_offsets(offsets: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(offsets.items()))


class Progress:
    """Next offsets processed per owned partition, and what was committed of them."""

    def __init__(self, log: Log, commit_every: int, commit_idle_s: float):
        self.log = log
        self.commit_every = commit_every
        self.commit_idle_s = commit_idle_s
        self.owned: set[int] = set()
        self.next: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.since_commit = 0
        self.last_commit = time.monotonic()

    def processed(self, recs: list[tuple[int, int, bytes | None]]) -> None:
        self.log.records(recs)
        for p, o, _ in recs:
            self.next[p] = o + 1
        self.since_commit += len(recs)

    def pending(self, parts=None) -> dict[int, int]:
        parts = self.owned if parts is None else parts
        return {p: self.next[p] for p in parts if p in self.next and self.committed.get(p) != self.next[p]}

    def due(self, got_records: bool) -> bool:
        if self.since_commit >= self.commit_every:
            return True
        return (not got_records and self.since_commit > 0
                and time.monotonic() - self.last_commit >= self.commit_idle_s)

    def before(self, offsets: dict[int, int]) -> None:
        self.log.event(f"commit-try {fmt_offsets(offsets)}")

    def after(self, offsets: dict[int, int], error: Exception | None) -> None:
        if error is None:
            self.committed.update(offsets)
            self.log.event(f"commit {fmt_offsets(offsets)}")
            self.since_commit = 0
            self.last_commit = time.monotonic()
        else:
            self.log.event(f"commit-failed {type(error).__name__}: {error}".replace("\n", " "))

    def assigned(self, parts) -> None:
        self.owned = set(parts)
        self.log.event(f"assign {fmt_parts(self.owned)}")

    def revoked(self, parts) -> None:
        parts = set(parts)
        self.log.event(f"revoke {fmt_parts(parts)}")
        self.owned -= parts
        for p in parts:
            self.next.pop(p, None)
            self.committed.pop(p, None)


# ====================================================================== kafka-python
def run_kafka_python(a, prog: Progress, stopping) -> None:
    from kafka import AsyncConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    kwargs = {}
    if a.strategy == "range":
        kwargs["partition_assignment_strategy"] = [RangePartitionAssignor]
    c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.client_id,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      session_timeout_ms=a.session_ms, heartbeat_interval_ms=a.heartbeat_ms,
                      **kwargs)

    def to_commit(offsets: dict[int, int]) -> dict:
        return {TopicPartition(a.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}

    def commit(parts=None) -> None:
        offsets = prog.pending(parts)
        if not offsets:
            return
        prog.before(offsets)
        try:
            c.commit(to_commit(offsets))
        except KafkaError as e:
            prog.after(offsets, e)
        else:
            prog.after(offsets, None)

    # kafka-python 3 runs rebalance listeners on its IO thread, where the blocking commit()
    # raises RuntimeError ("Cannot block on net.run() from the IO thread itself"): the
    # listener is async and awaits commit_async's future instead (the same OffsetCommit).
    class Listener(AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            parts = {tp.partition for tp in revoked}
            offsets = prog.pending(parts & prog.owned)
            if offsets:
                prog.before(offsets)
                try:
                    await c.commit_async(to_commit(offsets))
                except KafkaError as e:
                    prog.after(offsets, e)
                else:
                    prog.after(offsets, None)
            prog.revoked(parts)

        async def on_partitions_assigned(self, assigned):
            prog.assigned({tp.partition for tp in assigned})

    # kafka-python 3.0.12 bug: a leader whose assignment was computed from an empty metadata
    # snapshot rejoins when the next Metadata response fills it in, and if poll(timeout_ms)
    # expires while that JoinGroup/SyncGroup is in flight, the next poll finds need_rejoin()
    # already False (the leader refreshed its assignment snapshot) and never consumes the
    # finished join (coordinator/base.py join_group_async): no assignment, heartbeats left
    # disabled, the broker expires the session and the member sits idle for good. The
    # snapshot is only refreshed by a Metadata response that arrives after subscribe(), so
    # fetch metadata (topics()) between subscribe() and the first poll().
    c.subscribe([a.topic], listener=Listener())
    deadline = time.monotonic() + 30
    while a.topic not in c.topics():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no metadata for {a.topic}")
        time.sleep(0.05)
    while not stopping():
        got = c.poll(timeout_ms=200, max_records=500)
        recs = [(m.partition, m.offset, m.value) for batch in got.values() for m in batch]
        prog.processed(recs)
        if prog.due(bool(recs)):
            commit()
    prog.log.event("closing")
    commit()
    c.close(autocommit=False)


# ====================================================================== aiokafka
def run_aiokafka(a, prog: Progress, stopping) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.errors import KafkaError

    async def main() -> None:
        kwargs = {}
        if a.strategy == "range":
            kwargs["partition_assignment_strategy"] = (RangePartitionAssignor,)
        c = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.client_id,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=a.session_ms, heartbeat_interval_ms=a.heartbeat_ms,
                             **kwargs)

        async def commit(parts=None) -> None:
            offsets = prog.pending(parts)
            if not offsets:
                return
            prog.before(offsets)
            try:
                await c.commit({TopicPartition(a.topic, p): o for p, o in offsets.items()})
            except KafkaError as e:
                prog.after(offsets, e)
            else:
                prog.after(offsets, None)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                parts = {tp.partition for tp in revoked}
                await commit(parts & prog.owned)
                prog.revoked(parts)

            async def on_partitions_assigned(self, assigned):
                prog.assigned({tp.partition for tp in assigned})

        await c.start()
        try:
            c.subscribe([a.topic], listener=Listener())
            while not stopping():
                got = await c.getmany(timeout_ms=200, max_records=500)
                # Processed (and logged) with no await in between: the revoke callback,
                # which runs in the coordinator's task, always sees up-to-date progress.
                recs = [(m.partition, m.offset, m.value) for batch in got.values() for m in batch]
                prog.processed(recs)
                if prog.due(bool(recs)):
                    await commit()
            prog.log.event("closing")
            await commit()
        finally:
            await c.stop()

    asyncio.run(main())


# ====================================================================== confluent-kafka
def run_confluent(a, prog: Progress, stopping) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": a.session_ms, "heartbeat.interval.ms": a.heartbeat_ms}
    if a.strategy == "range":
        conf["partition.assignment.strategy"] = "range"
    c = Consumer(conf)

    def commit(parts=None) -> None:
        offsets = prog.pending(parts)
        if not offsets:
            return
        prog.before(offsets)
        try:
            res = c.commit(offsets=[TopicPartition(a.topic, p, o) for p, o in offsets.items()],
                           asynchronous=False)
            bad = [tp for tp in res or [] if tp.error is not None]
            if bad:
                raise KafkaException(bad[0].error)
        except KafkaException as e:
            prog.after(offsets, e)
        else:
            prog.after(offsets, None)

    def on_assign(consumer, partitions):
        prog.assigned({tp.partition for tp in partitions})

    def on_revoke(consumer, partitions):
        parts = {tp.partition for tp in partitions}
        commit(parts & prog.owned)
        prog.revoked(parts)

    c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping():
        msgs = c.consume(num_messages=500, timeout=0.2)
        recs = []
        for m in msgs:
            if m.error() is not None:
                prog.log.event(f"consume-error {m.error()}")
                continue
            p, o = m.partition(), m.offset()
            assert p is not None and o is not None
            recs.append((p, o, m.value()))
        prog.processed(recs)
        if prog.due(bool(recs)):
            commit()
    prog.log.event("closing")
    commit()
    c.close()


RUNNERS = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent": run_confluent}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", choices=sorted(RUNNERS), required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--strategy", choices=["default", "range"], default="default")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--commit-every", type=int, default=700)
    ap.add_argument("--commit-idle-s", type=float, default=0.5)
    ap.add_argument("--log-level", default="WARNING", help="the client libraries' logging: LEVEL[,logger=LEVEL...]")
    a = ap.parse_args(argv)
    a.client_id = a.client_id or f"groups2-{a.client}"
    # "LEVEL[,logger=LEVEL...]", e.g. "WARNING,kafka.coordinator=DEBUG"
    root_level, *per_logger = a.log_level.split(",")
    logging.basicConfig(level=getattr(logging, root_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for spec in per_logger:
        name, _, level = spec.partition("=")
        logging.getLogger(name).setLevel(getattr(logging, level.upper()))

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    log = Log(a.log)
    log.event(f"started {a.client}")
    prog = Progress(log, a.commit_every, a.commit_idle_s)
    RUNNERS[a.client](a, prog, lambda: bool(stop))
    log.event("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
