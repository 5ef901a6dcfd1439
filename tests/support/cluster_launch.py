"""Start a `Cluster` (tests/support/cluster.py) as bin/start-cluster.sh does and a user meets
it: ZooKeeper, then every broker at once, returning as soon as each one listens. Unlike
`Cluster.start` it does not wait for registration, a controller or every broker knowing the
others, so a test can reach the brokers in the moment a real client does.

`ControllerTimeline` records when /controller changed hands, as seen from a ZooKeeper watch,
so a test can tell how long after a controller was elected something happened.
"""
from __future__ import annotations

import bisect
import json
import threading
import time
from typing import Any, Callable

from tests.support.cluster import Cluster


def start_listening(cluster: Cluster, timeout: float = 60.0,
                    on_zookeeper: Callable[[], Any] | None = None) -> Cluster:
    """Start ZooKeeper, call `on_zookeeper` (e.g. to set watches before any broker runs), then
    start all brokers in parallel; return once every broker listens."""
    cluster.started = True
    try:
        cluster.start_zookeeper()
        if on_zookeeper is not None:
            on_zookeeper()
        errors: list[BaseException] = []

        def start(i: int) -> None:
            try:
                cluster.brokers[i].start(timeout)
            except BaseException as e:   # noqa: BLE001 - re-raised in the caller's thread
                errors.append(e)

        threads = [threading.Thread(target=start, args=(i,)) for i in range(cluster.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    except BaseException:
        cluster.stop()
        raise
    return cluster


class ControllerTimeline:
    """(monotonic time, controller id or None) for every change of /controller, from a kazoo
    DataWatch on the cluster's own client; `killed(id)` notes a kill -9 by the test, after
    which that broker's reign (its /controller lives until its session expires) is over."""

    def __init__(self, cluster: Cluster):
        self._lock = threading.Lock()
        self._times: list[float] = []
        self._ids: list[int | None] = []
        self._kills: list[tuple[float, int]] = []
        cluster.zk.DataWatch(cluster.path("/controller"), self._changed)

    def killed(self, broker_id: int) -> None:
        with self._lock:
            self._kills.append((time.monotonic(), broker_id))

    def _changed(self, data: bytes | None, stat: Any) -> None:
        now = time.monotonic()
        cid = int(json.loads(data)["brokerid"]) if data else None
        with self._lock:
            if not self._ids or self._ids[-1] != cid:
                self._times.append(now)
                self._ids.append(cid)

    def changes(self) -> list[tuple[float, int | None]]:
        with self._lock:
            return list(zip(self._times, self._ids))

    def last_kill_between(self, start: float, end: float) -> float | None:
        with self._lock:
            inside = [k_t for k_t, _ in self._kills if start <= k_t <= end]
        return max(inside) if inside else None

    def serving_since(self, t: float) -> float | None:
        """The first moment at or after `t` at which a live broker was controller (`t` itself
        if one already was), or None if that has not happened yet."""
        with self._lock:
            first = max(bisect.bisect_right(self._times, t) - 1, 0)
            for j in range(first, len(self._times)):
                start = max(t, self._times[j])
                cid = self._ids[j]
                if cid is None:
                    continue
                if not any(k_id == cid and self._times[j] <= k_t <= start
                           for k_t, k_id in self._kills):
                    return start
        return None
