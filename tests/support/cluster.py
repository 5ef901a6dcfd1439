"""A real strom cluster for integration and fault tests: a ZooKeeper server and N broker
processes (`BrokerProcess`) on free loopback ports, each with its own directory under
`workdir`, and kazoo to look at what the cluster wrote to ZooKeeper (Kafka's ZK-mode paths
under the chroot, `self.chroot`). The ZooKeeper server is the test run's shared one
(zk_process.SharedZooKeeper, the chroot then /strom-<unique>, deleted at stop) unless
`own_zookeeper=True` (a `ZooKeeperProcess` of its own, chroot /strom), which a test that stops,
pauses or restarts ZooKeeper asks for.

    with Cluster(tmp_path, brokers=3) as c:          # start(): ZooKeeper, brokers, registration
        c.bootstrap                                  # "127.0.0.1:p0,127.0.0.1:p1,127.0.0.1:p2"
        c.controller_id()                            # broker id in /controller, or None
        c.kill9(1); c.restart(1)                     # faults by broker index (= broker.id)
        c.partition_state("t", 0)                    # {"leader": .., "isr": [..], ...}

Brokers are addressed by their index, which is also their broker.id.

With `network` (a broker/testing/netns.py `Network` made with `Cluster.host_names(n)`, owned
and closed by the caller), ZooKeeper runs on host ZK_HOST and broker i on host `broker_host(i)`,
each in its own network namespace, listening and advertised on that host's address; the test
process reaches them all through the network's switch, and partitions are the network's faults:

    with Network.create(Cluster.host_names(3)) as net, Cluster(tmp, 3, network=net) as c:
        net.isolate(c.broker_host(c.leader("t", 0)))
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from clients.aio.errors import KafkaClientError
from clients.protocol.errors import KafkaError
from tests.support.broker_process import BrokerProcess
from tests.support.zk_process import SharedZooKeeper, ZooKeeperProcess

if TYPE_CHECKING:
    from broker.testing.netns import Network

T = TypeVar("T")
CHROOT = "/strom"
# STROM_TEST_SHARED_ZOOKEEPER=0: every cluster starts a ZooKeeper of its own.
SHARE_ZOOKEEPER = os.environ.get("STROM_TEST_SHARED_ZOOKEEPER", "1") != "0"
ZK_HOST = "zk"              # ZooKeeper's host name in a `network`


class Cluster:
    """`overrides` are extra server.properties lines for every broker (winning over the
    settings here); `broker_overrides[i]` only for broker i. Replication defaults follow the
    invariant the fault tests guard: replication factor min(3, N), min.insync.replicas
    min(2, N)."""

    def __init__(self, workdir: Path, brokers: int = 3, overrides: dict[str, str] | None = None, *,
                 default_replication_factor: int | None = None,
                 min_insync_replicas: int | None = None,
                 zookeeper_session_timeout_ms: int = 6000,
                 replica_lag_time_max_ms: int = 3000,
                 broker_overrides: dict[int, dict[str, str]] | None = None,
                 chroot: str = CHROOT, client_security: Any = None, network: "Network | None" = None,
                 own_zookeeper: bool = False):
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.network = network
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.size = brokers
        self.chroot = chroot
        # ZooKeeper expires sessions on tickTime boundaries, adding up to one tick to every
        # failure detection; a 500 ms tick keeps detection close to the session timeout
        # (minSessionTimeout = 2 ticks = 1 s, well below the brokers' timeout).
        # The run's shared server unless the test faults ZooKeeper (own_zookeeper), runs it in
        # a network namespace, or STROM_TEST_SHARED_ZOOKEEPER=0; on it, a chroot of its own.
        self.zookeeper: Any
        if own_zookeeper or network is not None or not SHARE_ZOOKEEPER:
            self.zookeeper = ZooKeeperProcess(self.workdir / "zookeeper", tick_time_ms=500)
        else:
            self.zookeeper = SharedZooKeeper.lease()
            self.chroot = f"{chroot}-{uuid.uuid4().hex[:12]}"
        if network is not None:
            self.zookeeper.host = network.ip(ZK_HOST)
            self.zookeeper.command_prefix = network.command(ZK_HOST, [])
        rf = min(3, brokers)
        self.replication_factor = default_replication_factor or rf
        self.min_insync_replicas = min_insync_replicas or min(2, brokers)
        self.brokers: list[BrokerProcess] = []
        for i in range(brokers):
            props = {
                "broker.id": str(i),
                "zookeeper.connect": self.zk_connect,
                "zookeeper.session.timeout.ms": str(zookeeper_session_timeout_ms),
                "zookeeper.connection.timeout.ms": str(zookeeper_session_timeout_ms),
                "replica.lag.time.max.ms": str(replica_lag_time_max_ms),
                "default.replication.factor": str(self.replication_factor),
                "min.insync.replicas": str(self.min_insync_replicas),
                "offsets.topic.replication.factor": str(rf),
                "transaction.state.log.replication.factor": str(rf),
                "transaction.state.log.min.isr": str(min(2, brokers)),
            }
            if network is not None:
                props["listeners"] = f"PLAINTEXT://{network.ip(self.broker_host(i))}:{{port}}"
            props.update(overrides or {})
            props.update((broker_overrides or {}).get(i, {}))
            b = BrokerProcess(self.workdir / f"broker-{i}", broker_id=i, overrides=props)
            if network is not None:
                b.host = network.ip(self.broker_host(i))
                b.command_prefix = network.command(self.broker_host(i), [])
            self.brokers.append(b)
        self._zk_in_configs = self.zookeeper.connect    # the host:port the brokers' configs name
        # How the cluster's own probes connect (a clients.aio.security.ClientSecurity) when
        # the brokers' port is a SASL or TLS listener; None: PLAINTEXT.
        self.client_security = client_security
        self._paused: set[int] = set()
        self._zk: Any = None
        self.started = False

    # ---- addresses --------------------------------------------------------------------------

    @staticmethod
    def host_names(brokers: int) -> list[str]:
        """The hosts a `network` for a cluster of `brokers` needs: ZooKeeper's and one each."""
        return [ZK_HOST, *(Cluster.broker_host(i) for i in range(brokers))]

    @staticmethod
    def broker_host(i: int) -> str:
        """Broker i's host name in a `network`."""
        return f"b{i}"

    @property
    def zk_connect(self) -> str:
        """zookeeper.connect of the brokers, chroot included."""
        return f"{self.zookeeper.connect}{self.chroot}"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, i: int) -> BrokerProcess:
        return self.brokers[i]

    def bootstrap_except(self, *ids: int) -> str:
        """Bootstrap servers without the given brokers (e.g. a killed one)."""
        return ",".join(b.bootstrap for i, b in enumerate(self.brokers) if i not in ids)

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self, timeout: float = 60.0, wait_for_controller: bool = True,
              only: int | None = None) -> "Cluster":
        """Start ZooKeeper and every broker (`only`: the first `only` of them, the others
        left for a test to add); wait until they are registered in /brokers/ids and (unless
        told not to) a controller is elected. Starting a started cluster does nothing (so
        `with Cluster(...).start(...) as c:` works)."""
        if self.started:
            return self
        self.started = True
        count = self.size if only is None else only
        try:
            self.start_zookeeper()
            for b in self.brokers[:count]:
                b.start(timeout)
            self.wait_for_brokers(count, timeout)
            if wait_for_controller:
                self.wait_for_controller(timeout)
            self.wait_for_brokers_known(timeout, count)
        except BaseException:
            self.stop()
            raise
        return self

    def start_zookeeper(self) -> None:
        """Start ZooKeeper (unless it runs) and point the brokers' configs at it: its first
        start moves it to another port if its own was taken (zk_process.py), and no broker
        has started before ZooKeeper has."""
        self.zookeeper.start()
        old, new = self._zk_in_configs, self.zookeeper.connect
        if new != old:
            for b in self.brokers:
                b.props = {k: v.replace(old, new) for k, v in b.props.items()}
                b.write_config()
            self._zk_in_configs = new

    def stop(self) -> None:
        """Stop every broker (SIGTERM, then SIGKILL), then ZooKeeper."""
        self.started = False
        for i in list(self._paused):
            self.sigcont(i)
        for b in self.brokers:
            try:
                b.stop()
            except Exception:   # keep stopping the others
                logging.getLogger(__name__).exception("stopping broker %s", b.broker_id)
        if getattr(self.zookeeper, "shared", False):
            self._delete_chroot()
        self._close_zk()
        self.zookeeper.stop()

    def _delete_chroot(self) -> None:
        """On the shared server: this cluster's znodes go with it (the server's memory is
        every test's)."""
        try:
            self.zk.delete(self.chroot, recursive=True)
        except Exception:   # gone already, or the server is: nothing more to free
            logging.getLogger(__name__).debug("deleting %s", self.chroot, exc_info=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- faults (by broker index) -----------------------------------------------------------

    def running(self, i: int) -> bool:
        proc = self.brokers[i].proc
        return proc is not None and proc.poll() is None

    def kill9(self, i: int) -> None:
        """SIGKILL broker i (no deregistration: its ZooKeeper session has to expire)."""
        b = self.brokers[i]
        self._paused.discard(i)
        b.kill9()
        b.stop()        # closes its log file; the process is already gone

    def terminate(self, i: int, timeout: float = 30.0) -> int | None:
        """SIGTERM broker i and wait for its controlled shutdown (SIGKILL after `timeout`)."""
        if i in self._paused:
            self.sigcont(i)
        return self.brokers[i].stop(timeout)

    def restart(self, i: int, hard: bool = False, timeout: float = 30.0) -> BrokerProcess:
        """Stop broker i if it runs (SIGTERM, or SIGKILL with `hard`) and start it again on
        the same port with the same log directory; waits until it listens."""
        if self.running(i):
            if hard:
                self.kill9(i)
            else:
                self.terminate(i)
        return self.brokers[i].start(timeout)

    def sigstop(self, i: int) -> None:
        """Freeze broker i (SIGSTOP): it keeps its sockets and session until the timeout."""
        proc = self.brokers[i].proc
        assert proc is not None and proc.poll() is None, f"broker {i} is not running"
        os.kill(proc.pid, signal.SIGSTOP)
        self._paused.add(i)

    def sigcont(self, i: int) -> None:
        proc = self.brokers[i].proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        self._paused.discard(i)

    # ---- ZooKeeper views --------------------------------------------------------------------

    @property
    def zk(self) -> Any:
        """A kazoo client on the ZooKeeper server, started on first use. It has no chroot (the
        brokers create theirs): give it `path(...)`s."""
        if self._zk is None:
            from kazoo.client import KazooClient
            logging.getLogger("kazoo").setLevel(logging.WARNING)
            zk = KazooClient(hosts=self.zookeeper.connect, timeout=10.0)
            zk.start(timeout=15)
            self._zk = zk
        return self._zk

    def path(self, path: str) -> str:
        """The absolute znode path of a path under the cluster's chroot."""
        return self.chroot.rstrip("/") + "/" + path.lstrip("/")

    def _close_zk(self) -> None:
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:
                pass
            self._zk = None

    def _get_json(self, path: str) -> Any:
        from kazoo.exceptions import NoNodeError
        try:
            data, _ = self.zk.get(self.path(path))
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def broker_ids(self) -> list[int]:
        """The ids registered in /brokers/ids (ephemeral znodes of live brokers)."""
        from kazoo.exceptions import NoNodeError
        try:
            return sorted(int(c) for c in self.zk.get_children(self.path("/brokers/ids")))
        except NoNodeError:
            return []

    def broker_registration(self, broker_id: int) -> dict | None:
        return self._get_json(f"/brokers/ids/{broker_id}")

    def transaction_coordinator(self, transactional_id: str) -> int | None:
        """The broker a running broker names (FindCoordinator, key type 1) as coordinating
        `transactional_id`; None if none answers."""
        for i, b in enumerate(self.brokers):
            if not self.running(i):
                continue
            try:
                r = self.request(b.port, "FindCoordinator", 3, {"key": transactional_id, "key_type": 1})
            except (OSError, KafkaClientError, KafkaError):
                continue
            if r.error_code == 0:
                return r.node_id
        return None

    def request(self, port: int, api: str, version: int, body: dict[str, Any]) -> Any:
        """One request to the broker on `port`, as the cluster's probes send them (over
        `client_security` when the listener needs it)."""
        host = next((b.host for b in self.brokers if b.port == port), "127.0.0.1")
        if self.client_security is None:
            from tests.support.wire import WireClient
            with WireClient(host, port, timeout=5) as w:
                return w.request(api, version, body)

        async def secured() -> Any:
            from clients.aio.connection import BrokerConnection
            conn = await BrokerConnection.connect(host, port, security=self.client_security,
                                                  timeout=5)
            try:
                return await conn.request(api, body, version=version)
            finally:
                await conn.close()
        return asyncio.run(secured())

    def controller_id(self) -> int | None:
        """The broker id in /controller, or None while no controller is elected."""
        data = self._get_json("/controller")
        return int(data["brokerid"]) if data else None

    def controller_epoch(self) -> int | None:
        from kazoo.exceptions import NoNodeError
        try:
            data, _ = self.zk.get(self.path("/controller_epoch"))
        except NoNodeError:
            return None
        return int(data)

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """/brokers/topics/<t>/partitions/<p>/state: {"controller_epoch", "leader",
        "leader_epoch", "isr", "version"}, or None."""
        return self._get_json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int | None:
        state = self.partition_state(topic, partition)
        return None if state is None or state.get("leader", -1) < 0 else int(state["leader"])

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's assigned replicas, in order (/brokers/topics/<t>), or []."""
        data = self._get_json(f"/brokers/topics/{topic}")
        return list((data or {}).get("partitions", {}).get(str(partition), []))

    def isr(self, topic: str, partition: int) -> list[int]:
        state = self.partition_state(topic, partition)
        return list(state.get("isr", [])) if state else []

    # ---- waiting ----------------------------------------------------------------------------

    @staticmethod
    def wait_until(cond: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1,
                   message: str | None = None) -> T:
        """Poll `cond` until it returns something truthy, and return that; TimeoutError with
        `message` (and the last value) otherwise."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            last = cond()
            if last:
                return last
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{message or 'condition'} not met within {timeout}s "
                                   f"(last: {last!r})")
            time.sleep(interval)

    def wait_for_brokers(self, n: int | None = None, timeout: float = 60.0) -> list[int]:
        """Wait until at least `n` (default: all) brokers are registered; returns their ids."""
        want = self.size if n is None else n

        def registered() -> list[int] | None:
            self._check_alive()
            ids = self.broker_ids()
            return ids if len(ids) >= want else None

        return self.wait_until(registered, timeout, message=f"{want} brokers in /brokers/ids")

    def wait_for_brokers_known(self, timeout: float = 60.0, count: int | None = None) -> None:
        """Wait until every running broker's own view (its Metadata answer, fed by its
        ZooKeeper watches) lists `count` (all) brokers: registration in ZooKeeper comes
        first, and a broker asked to create a topic right then could still count fewer."""
        count = self.size if count is None else count

        def known() -> bool | None:
            self._check_alive()
            for i, b in enumerate(self.brokers):
                if not self.running(i):
                    continue
                try:
                    md = self.request(b.port, "Metadata", 1, {"topics": []})
                except (OSError, KafkaClientError, KafkaError):
                    return None
                if len(md.brokers) < count:
                    return None
            return True

        self.wait_until(known, timeout, message=f"every running broker knowing {count} brokers")

    def wait_for_broker_gone(self, broker_id: int, timeout: float = 60.0) -> None:
        """Wait until broker_id's registration is gone (e.g. its session expired after kill9)."""
        self.wait_until(lambda: broker_id not in self.broker_ids(), timeout,
                        message=f"broker {broker_id} gone from /brokers/ids")

    def wait_for_controller(self, timeout: float = 60.0, other_than: int | None = None) -> int:
        """Wait until a controller (other than `other_than`) is elected; returns its id."""
        def elected() -> tuple[int] | None:
            cid = self.controller_id()
            return None if cid is None or cid == other_than else (cid,)

        return self.wait_until(elected, timeout, message="a controller in /controller")[0]

    def wait_for_leader(self, topic: str, partition: int, timeout: float = 60.0,
                        other_than: int | None = None) -> int:
        """Wait until the partition has a leader (other than `other_than`); returns its id."""
        def elected() -> tuple[int] | None:
            leader = self.leader(topic, partition)
            return None if leader is None or leader == other_than else (leader,)

        return self.wait_until(elected, timeout, message=f"a leader for {topic}/{partition}")[0]

    def _check_alive(self) -> None:
        """Fail fast when a broker exited with an error status (not by a signal sent by a test)
        or ZooKeeper died."""
        for i, b in enumerate(self.brokers):
            if b.proc is not None and b.proc.poll() is not None and b.proc.returncode > 0:
                raise RuntimeError(f"broker {i} exited with {b.proc.returncode}:\n"
                                   f"{b.output()[-4000:]}")
        if not self.zookeeper.running:
            raise RuntimeError(f"ZooKeeper is not running:\n{self.zookeeper.output()[-2000:]}")

    def output(self, i: int) -> str:
        return self.brokers[i].output()
