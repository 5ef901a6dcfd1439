"""One confluent-kafka group member as its own OS process, for the consumer-group tests.

    python -m tests.support.groups_consumer '<json config>'

Config keys: bootstrap, group, topic, name, out_dir, conf (extra consumer settings),
commit_every (records), commit_interval (seconds), final_commit (bool).

It subscribes to `topic` and, for every record of a partition it currently owns, appends
"partition offset value" to <out_dir>/<name>.records and flushes, before anything is
committed. It commits synchronously (explicit offsets: last processed + 1) every
`commit_every` records or `commit_interval` seconds, and in on_revoke for the partitions it
gives up. Everything that happens to the member goes to <out_dir>/<name>.events as JSON
lines: start, assign / revoke / lost (with the partitions and the assignment after it),
commit (the offsets committed), commit_failed, stale, error, closing, closed.

It runs until <out_dir>/<name>.stop exists, then (optionally) commits and close()s: a
dynamic member leaves the group, a static member (group.instance.id) does not.
"""
from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


class Member:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.topic = cfg["topic"]
        out = cfg["out_dir"]
        name = cfg["name"]
        self.stop_path = os.path.join(out, f"{name}.stop")
        self.records = open(os.path.join(out, f"{name}.records"), "a", buffering=1 << 16)
        self.events = open(os.path.join(out, f"{name}.events"), "a", buffering=1 << 16)
        self.commit_every = cfg.get("commit_every", 500)
        self.commit_interval = cfg.get("commit_interval", 1.0)
        self.assigned: set[int] = set()
        self.pending: dict[int, int] = {}      # partition -> next offset to commit
        self.since_commit = 0
        self.last_commit = time.monotonic()
        conf = {"bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"],
                "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
        conf.update(cfg.get("conf", {}))
        self.cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self.consumer = Consumer(conf)

    def event(self, ev: str, **kw) -> None:
        kw.update(t=time.time(), ev=ev)
        self.events.write(json.dumps(kw) + "\n")
        self.events.flush()

    # ------------------------------------------------------------ rebalance callbacks
    def on_assign(self, consumer, parts) -> None:
        ps = sorted(tp.partition for tp in parts)
        if self.cooperative:
            self.assigned |= set(ps)
        else:
            self.assigned = set(ps)
            self.pending.clear()
        self.event("assign", parts=ps, now=sorted(self.assigned), member_id=consumer.memberid())

    def on_revoke(self, consumer, parts) -> None:
        ps = sorted(tp.partition for tp in parts)
        self.commit({p: o for p, o in self.pending.items() if p in ps}, why="revoke")
        for p in ps:
            self.assigned.discard(p)
            self.pending.pop(p, None)
        self.event("revoke", parts=ps, now=sorted(self.assigned))

    def on_lost(self, consumer, parts) -> None:
        ps = sorted(tp.partition for tp in parts)
        for p in ps:
            self.assigned.discard(p)
            self.pending.pop(p, None)
        self.event("lost", parts=ps, now=sorted(self.assigned))

    # ------------------------------------------------------------ commits
    def commit(self, offsets: dict[int, int], why: str) -> None:
        if not offsets:
            return
        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        try:
            result = self.consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            self.event("commit_failed", why=why, error=str(e), offsets=offsets)
            return
        done = {}
        for tp in result or []:
            if tp.error is not None:
                self.event("commit_failed", why=why, error=str(tp.error), partition=tp.partition)
            else:
                done[tp.partition] = tp.offset
                if self.pending.get(tp.partition) == tp.offset:
                    del self.pending[tp.partition]
        self.event("commit", why=why, offsets={str(p): o for p, o in done.items()})

    def maybe_commit(self) -> None:
        if self.pending and (self.since_commit >= self.commit_every
                             or time.monotonic() - self.last_commit >= self.commit_interval):
            self.commit(dict(self.pending), why="periodic")
            self.since_commit = 0
            self.last_commit = time.monotonic()

    # ------------------------------------------------------------ main loop
    def run(self) -> None:
        self.event("start", pid=os.getpid())
        self.consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke,
                                on_lost=self.on_lost)
        while not os.path.exists(self.stop_path):
            msg = self.consumer.poll(0.2)
            if msg is None:
                self.maybe_commit()
                continue
            if msg.error():
                self.event("error", error=str(msg.error()))
                continue
            p, o = msg.partition(), msg.offset()
            if p not in self.assigned:
                self.event("stale", partition=p, offset=o)
                continue
            value = (msg.value() or b"").decode()
            self.records.write(f"{p} {o} {value}\n")
            self.records.flush()
            self.pending[p] = o + 1
            self.since_commit += 1
            self.maybe_commit()
        if self.cfg.get("final_commit", True):
            self.commit(dict(self.pending), why="final")
        self.event("closing")
        self.consumer.close()
        self.event("closed")


def main() -> None:
    Member(json.loads(sys.argv[1])).run()


if __name__ == "__main__":
    main()
