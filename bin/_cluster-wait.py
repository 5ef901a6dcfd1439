"""What bin/start-cluster.sh waits for, read from ZooKeeper (run with the repository's venv).

    _cluster-wait.py registered ZK_CONNECT TIMEOUT IDS PIDS SINCE
        until every broker id of IDS (comma-separated) is in /brokers/ids, registered at or
        after SINCE (ms since the epoch: not a dead predecessor's registration that has not
        expired yet), and a controller is elected; exit 2 as soon as a process of PIDS
        (comma-separated) is gone, 1 on timeout.
    _cluster-wait.py in-sync ZK_CONNECT TIMEOUT ID PID SINCE
        until broker ID is registered (as above) and no partition is under-replicated (each ISR holds
        every replica: what a rolling restart waits for before the next broker); prints how
        long registering and rejoining took. Exit codes as above.
    _cluster-wait.py controller ZK_CONNECT
        prints the controller's broker id (nothing when there is none).

Progress goes to stderr, prefixed with [strom], as the scripts' own lines.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


def say(text: str) -> None:
    print(f"[strom] {text}", file=sys.stderr, flush=True)


def running(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class View:
    """The few znodes the scripts look at, under the chroot of zookeeper.connect."""

    def __init__(self, connect: str):
        hosts, slash, chroot = connect.partition("/")
        self.root = "/" + chroot.strip("/") if slash and chroot.strip("/") else ""
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        self.zk = KazooClient(hosts=hosts, timeout=10.0)
        self.zk.start(timeout=15)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _json(self, path: str) -> Any:
        try:
            return json.loads(self.zk.get(self.root + path)[0])
        except (NoNodeError, ValueError, TypeError):
            return None

    def brokers(self, since_ms: int = 0) -> list[int]:
        """Registered broker ids, of registrations made at or after `since_ms`."""
        try:
            ids = sorted(int(c) for c in self.zk.get_children(self.root + "/brokers/ids"))
        except NoNodeError:
            return []
        out = []
        for i in ids:
            stat = self.zk.exists(f"{self.root}/brokers/ids/{i}")
            if stat is not None and stat.ctime >= since_ms:
                out.append(i)
        return out

    def controller(self) -> int | None:
        doc = self._json("/controller")
        return doc.get("brokerid") if isinstance(doc, dict) else None

    def under_replicated(self) -> list[str]:
        """Partitions whose ISR lacks one of their replicas, as topic-partition names."""
        out = []
        try:
            topics = self.zk.get_children(self.root + "/brokers/topics")
        except NoNodeError:
            return []
        for topic in sorted(topics):
            assignment = self._json(f"/brokers/topics/{topic}") or {}
            for p, replicas in sorted((assignment.get("partitions") or {}).items()):
                state = self._json(f"/brokers/topics/{topic}/partitions/{p}/state") or {}
                if set(replicas) - set(state.get("isr") or []):
                    out.append(f"{topic}-{p}")
        return out


def poll(check: Callable[[], tuple[bool, str]], timeout: float, pids: list[str], what: str) -> int:
    """Call `check` (-> done, status) until done (0); 2 as soon as a process of `pids` is
    gone, 1 after `timeout`. The status is printed every 10 s and at the end."""
    start = time.monotonic()
    said = start - 10
    while True:
        dead = [p for p in pids if not running(p)]
        if dead:
            say(f"broker process(es) {' '.join(dead)} exited")
            return 2
        done, status = check()
        now = time.monotonic()
        if done:
            say(status)
            return 0
        if now - start >= timeout:
            say(f"after {timeout:.0f}s {what}: {status}")
            return 1
        if now - said >= 10:
            said = now
            say(f"waiting: {status}")
        time.sleep(0.2)


def registered(view: View, timeout: float, ids: list[int], pids: list[str], since_ms: int) -> int:
    def check() -> tuple[bool, str]:
        have, controller = view.brokers(since_ms), view.controller()
        if set(ids) <= set(have) and controller is not None:
            return True, f"brokers {ids} registered; broker {controller} is the controller"
        return False, f"registered {have or 'none'} of {ids}; controller: {controller}"
    return poll(check, timeout, pids, "not all registered")


def in_sync(view: View, timeout: float, broker: int, pid: str, since_ms: int) -> int:
    start = time.monotonic()
    took_register: float | None = None

    def check() -> tuple[bool, str]:
        nonlocal took_register
        if took_register is None and broker in view.brokers(since_ms):
            took_register = time.monotonic() - start
        if took_register is None:
            return False, f"broker {broker} is not registered yet"
        lagging = view.under_replicated()
        if not lagging:
            return True, (f"broker {broker} registered after {took_register:.1f}s; no partition "
                          f"under-replicated after {time.monotonic() - start:.1f}s")
        return False, f"{len(lagging)} under-replicated partition(s): {' '.join(lagging[:10])}"
    return poll(check, timeout, [pid], f"broker {broker} is not back in sync")


def main(argv: list[str]) -> int:
    what, connect = argv[0], argv[1]
    view = View(connect)
    try:
        if what == "registered":
            return registered(view, max(float(argv[2]), 5.0), [int(i) for i in argv[3].split(",") if i],
                              [p for p in argv[4].split(",") if p], int(argv[5]))
        if what == "in-sync":
            return in_sync(view, max(float(argv[2]), 5.0), int(argv[3]), argv[4], int(argv[5]))
        if what == "controller":
            controller = view.controller()
            if controller is not None:
                print(controller)
            return 0
        say(f"_cluster-wait.py: unknown check {what!r}")
        return 1
    finally:
        view.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
