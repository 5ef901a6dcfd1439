"""IsrChangeAnnouncer: one notification at a time, each with everything changed since the
last; a failed one keeps its partitions for the next."""
from __future__ import annotations

import asyncio

from broker.replication.isr_announcer import IsrChangeAnnouncer


class Notify:
    def __init__(self) -> None:
        self.sent: list[list[tuple[str, int]]] = []
        self.fail = False
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, batch: list[tuple[str, int]]) -> None:
        await self.gate.wait()
        if self.fail:
            raise ConnectionError("ZooKeeper unreachable")
        self.sent.append(batch)


def test_changes_while_a_notification_is_under_way_go_in_the_next_one() -> None:
    async def main() -> None:
        notify = Notify()
        notify.gate.clear()
        a = IsrChangeAnnouncer(notify)
        a.changed(("t", 0))
        await asyncio.sleep(0)
        for i in range(1, 100):                     # 99 more while the first is in flight
            a.changed(("t", i))
        notify.gate.set()
        await asyncio.sleep(0.01)
        assert notify.sent == [[("t", 0)], [("t", i) for i in range(1, 100)]]
        assert not a.unannounced

    asyncio.run(main())


def test_a_failed_notification_keeps_its_partitions_for_the_next() -> None:
    async def main() -> None:
        notify = Notify()
        notify.fail = True
        a = IsrChangeAnnouncer(notify)
        a.changed(("t", 0))
        await asyncio.sleep(0.01)
        assert notify.sent == [] and a.unannounced == {("t", 0)}
        notify.fail = False
        a.flush()                                   # the periodic ISR check
        await asyncio.sleep(0.01)
        assert notify.sent == [[("t", 0)]] and not a.unannounced

    asyncio.run(main())
