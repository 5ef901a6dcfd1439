"""Running strom for a test: `StromBroker` (one standalone broker, no ZooKeeper) and
`StromCluster` (a ZooKeeper server and N brokers), each with the addresses a client needs,
topic helpers that return once every broker serves the topic, and the faults a test
injects into broker i. The pytest fixtures (`broker.testing.pytest_plugin`) hand these out;
they work without pytest too:

    with StromCluster.start(tmp_dir, brokers=3) as cluster:
        cluster.create_topic("events", partitions=3, replication_factor=3)
        cluster.kill9(cluster.leader("events", 0))

Brokers are numbered 0..N-1, which is also their broker.id. Stopping (close(), the end of a
`with`, the fixtures' teardown) kills every process with SIGKILL: the data is thrown away.
Not thread-safe: one test drives it (the admin client it lends may be shared).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Self, TypeVar

from . import topic_requests
from .launch import BrokerNode
from .probe import BrokerView, broker_view
from .zookeeper import ZooKeeperNode
from .zygote import Zygote, shared_zygote

if TYPE_CHECKING:
    from clients.admin import AdminClient

T = TypeVar("T")

# Settings for tests, as testcontainers' KafkaContainer has them: one partition for the
# internal topics (a consumer group's first FindCoordinator creates __consumer_offsets; 50
# partitions would make it wait for 50 elections) and no delay before a group's first
# rebalance.
TEST_DEFAULTS = {
    "num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def wait_until(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.02) -> T:
    """Poll `check` until it returns something truthy; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout}s")
        time.sleep(interval)


class _Brokers:
    """What a standalone broker and a cluster share: addresses, admin helpers, controls."""

    def __init__(self, workdir: Path, nodes: list[BrokerNode], zookeeper: ZooKeeperNode | None):
        self.workdir = workdir
        self.nodes = nodes
        self.zookeeper = zookeeper
        self._admin: AdminClient | None = None

    # ---- addresses --------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """"127.0.0.1:p0,127.0.0.1:p1,...": every broker, stopped ones included (clients
        skip those), so the string stays the same through kills and restarts."""
        return ",".join(n.address for n in self.nodes)

    def address(self, i: int = 0) -> str:
        """host:port of broker i."""
        return self.nodes[i].address

    @property
    def size(self) -> int:
        return len(self.nodes)

    # ---- topics -----------------------------------------------------------------------------

    def admin(self) -> "AdminClient":
        """strom's admin client (`clients.admin.AdminClient`) on this cluster, for what the
        helpers here do not do (configs, groups, ACLs...); made on first use, closed with
        the cluster."""
        if self._admin is None:
            from clients.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        """Create a topic (replication factor None: the brokers' default.replication.factor)
        and return once every running broker names a leader for each of its partitions.
        Raises the error table's exceptions (clients.protocol.errors), e.g.
        TopicAlreadyExistsError."""
        self._to_controller(lambda port: topic_requests.create_topic(
            port, name, partitions, replication_factor or -1, configs or {}, timeout), timeout)
        self.wait_for_topic(name, partitions, timeout)

    def _to_controller(self, send: Callable[[int], None], timeout: float) -> None:
        """`send(port)` to the controller (creations and deletions go there), asked again of
        the new one while the controller moves."""
        from clients.protocol.errors import NotControllerError
        deadline = time.monotonic() + timeout
        while True:
            views = self._views_by_id()
            controller = next(iter(views.values())).controller_id if views else -1
            node = self.nodes[controller] if 0 <= controller < len(self.nodes) else None
            if node is not None and node.port is not None and controller in views:
                try:
                    return send(node.port)
                except (NotControllerError, OSError):
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no controller took the request within {timeout}s")
            time.sleep(0.02)

    def wait_for_topic(self, name: str, partitions: int = 1, timeout: float = 30.0) -> None:
        """Wait until every running broker names a leader for partitions 0..partitions-1 (for
        partitions < 1: for every partition it knows of)."""
        def served() -> bool:
            views = self._views([name])
            for view in views:
                leaders = view.leaders.get(name, {})
                count = partitions if partitions > 0 else len(leaders)
                if count == 0 or any(leaders.get(p, -1) < 0 for p in range(count)):
                    return False
            return bool(views)
        wait_until(served, timeout, f"leaders of every partition of {name} on every broker")

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        """Delete a topic; returns once no running broker lists it."""
        self._to_controller(lambda port: topic_requests.delete_topic(port, name, timeout), timeout)
        wait_until(lambda: all(name not in v.leaders for v in self._views([name])), timeout,
                   f"{name} gone from every broker")

    def list_topics(self) -> list[str]:
        """The topics, internal ones left out, sorted (as the first running broker knows them)."""
        for node in self.nodes:
            if node.port is not None and not node.paused and node.running():
                return topic_requests.topic_names(node.port)
        raise RuntimeError("no broker is running")

    def leader(self, topic: str, partition: int = 0) -> int:
        """The broker leading the partition, as the controller sees it; -1 when none does
        (or no running broker answers)."""
        views = self._views_by_id([topic])
        if not views:
            return -1
        first = next(iter(views.values()))
        view = views.get(first.controller_id, first)
        return view.leaders.get(topic, {}).get(partition, -1)

    def wait_for_leader(self, topic: str, partition: int = 0, other_than: int | None = None,
                        timeout: float = 30.0) -> int:
        """Wait until a running broker other than `other_than` leads the partition; its id."""
        def elected() -> tuple[int] | None:
            leader = self.leader(topic, partition)
            ok = leader >= 0 and leader != other_than and self.running(leader)
            return (leader,) if ok else None
        return wait_until(elected, timeout, f"a leader of {topic}-{partition}"
                          + (f" other than {other_than}" if other_than is not None else ""))[0]

    def _views_by_id(self, topics: list[str] | None = None) -> dict[int, BrokerView]:
        """The Metadata answer of each running, unpaused broker that answers."""
        views = {}
        for i, node in enumerate(self.nodes):
            if node.port is None or node.paused or not node.running():
                continue
            try:
                views[i] = broker_view(node.port, topics)
            except (OSError, ValueError):   # not (yet) answering: left out
                continue
        return views

    def _views(self, topics: list[str] | None = None) -> list[BrokerView]:
        return list(self._views_by_id(topics).values())

    # ---- faults -----------------------------------------------------------------------------

    def running(self, i: int = 0) -> bool:
        """Broker i's process runs (paused or not)."""
        return self.nodes[i].running()

    def kill9(self, i: int = 0) -> None:
        """SIGKILL broker i: no controlled shutdown; a cluster sees it gone in milliseconds
        (its port refuses), its ZooKeeper session expires later."""
        self.nodes[i].kill9()

    def pause(self, i: int = 0) -> None:
        """SIGSTOP broker i: it holds its connections and its ZooKeeper session until that
        expires (zookeeper.session.timeout.ms), then the cluster moves on without it."""
        self.nodes[i].pause()

    def resume(self, i: int = 0) -> None:
        """SIGCONT broker i."""
        self.nodes[i].resume()

    def stop(self, i: int = 0, timeout: float = 15.0) -> None:
        """SIGTERM broker i: a controlled shutdown (leadership moves first), SIGKILL after
        `timeout` seconds."""
        self.nodes[i].stop(timeout)

    def restart(self, i: int = 0, hard: bool = False, timeout: float = 30.0) -> None:
        """Stop broker i if it runs (SIGTERM, or SIGKILL with `hard`), start it again on its
        port with its data, and return once it serves."""
        node = self.nodes[i]
        if node.running() and hard:
            node.kill9()
        elif node.running():
            node.stop()
        node.start(timeout)
        self._wait_ready([i], timeout)

    def log(self, i: int = 0) -> str:
        """Broker i's output (every run)."""
        return self.nodes[i].output()

    def wait_for_brokers(self, timeout: float = 30.0) -> None:
        """Wait until every running, unpaused broker answers, knows all of them and a
        controller (after a resume(i), or a session expiry): the state a fixture starts in."""
        self._wait_ready([i for i, n in enumerate(self.nodes) if n.running() and not n.paused],
                         timeout)

    def _wait_ready(self, started: list[int], timeout: float) -> None:
        """After brokers `started` started: a standalone broker serves by then."""

    # ---- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every broker (and ZooKeeper) and wait for them to be gone."""
        errors: list[BaseException] = []
        if self._admin is not None:
            admin, self._admin = self._admin, None
            _keep_going(errors, admin.close)
        for node in self.nodes:
            _keep_going(errors, node.kill)
        if self.zookeeper is not None:
            _keep_going(errors, self.zookeeper.kill)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _keep_going(errors: list[BaseException], step: Callable[[], Any]) -> None:
    try:
        step()
    except Exception as e:   # noqa: BLE001 - the teardown goes on; the first error is raised
        errors.append(e)


class StromBroker(_Brokers):
    """One standalone broker (no ZooKeeper): the whole cluster, broker 0."""

    @classmethod
    def start(cls, workdir: Path, configs: Mapping[str, str] | None = None, timeout: float = 30.0,
              zygote: Zygote | None = None) -> "StromBroker":
        """Start it in `workdir` with `configs` (server.properties keys) over TEST_DEFAULTS
        and single replicas; return once it serves."""
        props = dict(TEST_DEFAULTS, **{"offsets.topic.replication.factor": "1",
                                       "transaction.state.log.replication.factor": "1",
                                       "transaction.state.log.min.isr": "1"})
        props.update(configs or {})
        node = BrokerNode(Path(workdir) / "broker-0", 0, props, zygote or shared_zygote())
        broker = cls(Path(workdir), [node], None)
        try:
            node.start(timeout)
        except BaseException:
            broker.close()
            raise
        return broker


class StromCluster(_Brokers):
    """A ZooKeeper server and N brokers. Replication as the fault tests keep it: replication
    factor min(3, N), min.insync.replicas min(2, N), for the internal topics too."""

    @classmethod
    def start(cls, workdir: Path, brokers: int = 3, configs: Mapping[str, str] | None = None,
              broker_configs: Mapping[int, Mapping[str, str]] | None = None, timeout: float = 30.0,
              zygote: Zygote | None = None) -> "StromCluster":
        """Start ZooKeeper and `brokers` brokers in `workdir`; `configs` (server.properties
        keys) apply to every broker, `broker_configs[i]` to broker i alone. Returns once every
        broker knows all the others and a controller."""
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        workdir = Path(workdir)
        zygote = zygote or shared_zygote()
        zookeeper = ZooKeeperNode(workdir / "zookeeper")
        rf, min_isr = str(min(3, brokers)), str(min(2, brokers))
        props = dict(TEST_DEFAULTS, **{
            "zookeeper.session.timeout.ms": "6000",
            "replica.lag.time.max.ms": "3000",
            "default.replication.factor": rf, "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr})
        props.update(configs or {})
        nodes = [BrokerNode(workdir / f"broker-{i}", i, dict(props, **(broker_configs or {}).get(i, {})),
                            zygote) for i in range(brokers)]
        cluster = cls(workdir, nodes, zookeeper)
        try:
            zookeeper.launch()
            zygote.warm()           # the zygote imports the broker while the JVM starts
            zookeeper.wait_ready(timeout)
            for node in nodes:
                node.props["zookeeper.connect"] = zookeeper.connect
                node.launch()
            for node in nodes:
                node.wait_started(timeout)
            cluster._wait_ready(list(range(brokers)), timeout)
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _wait_ready(self, started: list[int], timeout: float) -> None:
        """Until brokers `started` know every running broker and a controller, and every
        running broker knows them."""
        def ready() -> bool:
            views = self._views_by_id()
            alive = set(views)
            if not set(started) <= alive:
                return False
            return all(v.controller_id >= 0 and set(v.brokers) >= alive for v in views.values())
        wait_until(ready, timeout, f"brokers {started} knowing every running broker and a controller")

    def controller(self) -> int:
        """The controller's broker id as the running brokers report it; -1 while none."""
        views = self._views()
        return views[0].controller_id if views else -1
