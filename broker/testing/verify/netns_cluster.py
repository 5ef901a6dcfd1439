"""The strom cluster strom-verify starts itself for network partitions (`--netns-cluster N`,
root only): ZooKeeper and each broker on a host of their own, a network namespace of
broker/testing/netns.py, so that the switch between them can cut any link (brokers sharing
127.0.0.1 cannot be cut apart).

    with NetnsCluster.start(3, data_dir=None, configs={}, log=print) as c:
        c.bootstrap                    # "10.213.K.2:9092,10.213.K.3:9092,10.213.K.4:9092"
        c.processes.kill9(1)           # a LocalCluster, as a --cluster-dir's
        c.network.isolate(c.host_of(1))

ZooKeeper runs on host "zk" (port 2181), broker i on host "b<i>" (port 9092), both listening on
their host's address; strom-verify's clients, in the root namespace, reach every host through
the switch unless a fault cuts them. Brokers are real `python -m broker` processes
(`ip netns exec` execs them: the pid is the broker's), with pid files in DATA/run, so the
signal faults act on them as on any local cluster, and a killed broker starts again inside
its namespace. The data is DATA/zookeeper and DATA/broker-<i> (server.properties, kafka-logs/,
broker.log): a temporary directory removed at the end, or `data_dir`, kept.

`close()` (the end of the `with`, also on Ctrl-C or an error) kills the brokers and ZooKeeper
and removes the namespaces. A strom-verify killed with -9 leaves its namespaces behind:
the next Network.create removes them (its creator's pid is gone), or `ip netns del`.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

import broker
from broker.testing.cluster import TEST_DEFAULTS
from broker.testing.netns import Network
from broker.testing.probe import METADATA_VERSION, request
from broker.testing.verify.local_cluster import PidFileCluster
from broker.testing.zookeeper import ZooKeeperNode

ZK_HOST = "zk"
ZK_PORT = 2181
BROKER_PORT = 9092
MIN_BROKERS = 3         # a partition needs a majority side: a leader and two followers
MAX_BROKERS = 20
START_TIMEOUT = 60.0

# Failure detection as strom's own cluster fixtures have it (a cut broker's session expires
# in seconds, not Kafka's 18 s); `configs` win.
BROKER_DEFAULTS = {
    **TEST_DEFAULTS,
    "zookeeper.session.timeout.ms": "6000",
    "zookeeper.connection.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
}


def broker_host(broker_id: int) -> str:
    return f"b{broker_id}"


def host_names(brokers: int) -> list[str]:
    return [ZK_HOST, *(broker_host(i) for i in range(brokers))]


class HostedZooKeeper(ZooKeeperNode):
    """broker/testing's ZooKeeperNode (Debian's jar, its fast-start JVM flags and zoo.cfg) on
    a host of `network`: it runs inside the host's namespace and listens on its address."""

    def __init__(self, workdir: Path, network: Network):
        super().__init__(workdir)
        self.network = network
        self.port = ZK_PORT             # the namespace's ports are all free
        self.host = network.ip(ZK_HOST)
        self.command_prefix = network.command(ZK_HOST, [])


class PartitionSight(NamedTuple):
    leader: int             # -1: none
    replicas: list[int]
    isr: list[int]


class BrokerSight(NamedTuple):
    """What one broker reports: the brokers and controller it knows, and a topic's
    partitions."""

    brokers: set[int]
    controller: int         # -1: none known
    partitions: dict[int, PartitionSight]


class HostedBroker:
    """Broker `broker_id` on its host: its directory (server.properties, kafka-logs/,
    broker.log) and how to start it there."""

    def __init__(self, workdir: Path, broker_id: int, network: Network, props: Mapping[str, str]):
        self.workdir = workdir
        self.broker_id = broker_id
        self.network = network
        self.host = broker_host(broker_id)
        self.ip = network.ip(self.host)
        self.props = {**props, "broker.id": str(broker_id),
                      "listeners": f"PLAINTEXT://{self.ip}:{BROKER_PORT}",
                      "log.dirs": str(workdir / "kafka-logs")}

    @property
    def address(self) -> str:
        return f"{self.ip}:{BROKER_PORT}"

    def spawn(self) -> subprocess.Popen:
        """`python -m broker server.properties` inside the host, output appended to
        broker.log; returns at once (the process may still be `ip` for a moment)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        source_root = str(Path(broker.__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH")) if p))
        with open(self.workdir / "broker.log", "ab") as out:
            # a session of its own: a Ctrl-C reaches strom-verify, whose teardown ends it
            return subprocess.Popen(self.network.command(self.host, [sys.executable, "-m", "broker",
                                                                     str(config)]),
                                    cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


class NetnsCluster:
    """ZooKeeper and brokers 0..N-1 on hosts of one Network; see the module docstring.
    `processes` is the LocalCluster the fault schedule signals; `network` is cut by the
    partition faults (hosts: `ZK_HOST`, `host_of(broker_id)`)."""

    def __init__(self, directory: Path, network: Network, keep_data: bool):
        self.directory = directory
        self.network = network
        self.keep_data = keep_data
        self.zookeeper: HostedZooKeeper | None = None
        self.brokers: dict[int, HostedBroker] = {}
        self._procs: dict[int, subprocess.Popen] = {}      # the latest process of each broker
        self._processes: PidFileCluster | None = None
        self._closed = False

    @classmethod
    def start(cls, brokers: int, data_dir: Path | None = None,
              configs: Mapping[str, str] | None = None, log: Callable[[str], None] = print,
              timeout: float = START_TIMEOUT) -> "NetnsCluster":
        """Make the network, start ZooKeeper and the brokers in it, and return once every
        broker knows all the others and a controller. `data_dir` must be empty or absent
        (it is kept); without it a temporary directory is used and removed. `configs` are
        server.properties keys for every broker (over BROKER_DEFAULTS). Raises
        NetnsUnavailable (not root, no iproute2/iptables), ZooKeeperUnavailable, ValueError
        (a bad size or a non-empty data_dir) or what a start met; nothing is left behind."""
        if not MIN_BROKERS <= brokers <= MAX_BROKERS:
            raise ValueError(f"--netns-cluster takes {MIN_BROKERS} to {MAX_BROKERS} brokers, "
                             f"not {brokers} (a partition needs a leader and two followers)")
        if data_dir is not None:
            data_dir = Path(data_dir).resolve()
            if data_dir.exists() and any(data_dir.iterdir()):
                raise ValueError(f"--data-dir {data_dir} is not empty (a netns cluster starts "
                                 f"from nothing)")
            data_dir.mkdir(parents=True, exist_ok=True)
            directory = data_dir
        else:
            directory = Path(tempfile.mkdtemp(prefix="strom-verify-"))
        try:
            network = Network.create(host_names(brokers))
        except BaseException:
            if data_dir is None:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        cluster = cls(directory, network, keep_data=data_dir is not None)
        try:
            cluster._start(brokers, configs or {}, log, timeout)
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _start(self, brokers: int, configs: Mapping[str, str], log: Callable[[str], None],
               timeout: float) -> None:
        began = time.monotonic()
        zk = self.zookeeper = HostedZooKeeper(self.directory / "zookeeper", self.network)
        zk.launch()
        zk.wait_ready(timeout)
        rf, min_isr = str(min(3, brokers)), str(min(2, brokers))
        props = {**BROKER_DEFAULTS, "default.replication.factor": rf, "min.insync.replicas": min_isr,
                 "offsets.topic.replication.factor": rf,
                 "transaction.state.log.replication.factor": rf,
                 "transaction.state.log.min.isr": min_isr, **configs,
                 "zookeeper.connect": zk.connect}
        run = self.directory / "run"
        run.mkdir(exist_ok=True)
        for i in range(brokers):
            self.brokers[i] = HostedBroker(self.directory / f"broker-{i}", i, self.network, props)
            (run / f"broker-{i}.pid").touch()       # empty: not running, started below
        self._processes = PidFileCluster(self.directory, launcher=self._launch)
        for i in self.brokers:
            self._processes.start(i)
        self._wait_registered(began + timeout)
        log(f"netns cluster up in {time.monotonic() - began:.1f}s: ZooKeeper on {zk.connect}, "
            f"brokers {self.bootstrap} (data in {self.directory})")

    def _launch(self, broker_id: int) -> subprocess.Popen:
        proc = self.brokers[broker_id].spawn()
        self._procs[broker_id] = proc
        return proc

    def _wait_registered(self, deadline: float) -> None:
        """Until every broker answers, names all of them and a controller."""
        while True:
            waiting = [i for i in self.brokers if not self._knows_everyone(i)]
            if not waiting:
                return
            for i in waiting:
                proc = self._procs[i]
                if proc.poll() is not None:
                    raise RuntimeError(f"broker {i} exited with {proc.returncode}:\n"
                                       f"{(self.brokers[i].workdir / 'broker.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"brokers {waiting} not registered and serving in time "
                                   f"(their logs: {self.directory}/broker-<id>/broker.log)")
            time.sleep(0.1)

    def _metadata(self, broker_id: int, topics: list[str]) -> Any:
        return request(BROKER_PORT, "Metadata", METADATA_VERSION,
                       {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False},
                       timeout=2.0, host=self.brokers[broker_id].ip)

    def _knows_everyone(self, broker_id: int) -> bool:
        sight = self.seen_by(broker_id)
        return sight is not None and sight.controller >= 0 and sight.brokers == set(self.brokers)

    # ---- what the faults use ---------------------------------------------------------------

    @property
    def processes(self) -> PidFileCluster:
        assert self._processes is not None, "not started"
        return self._processes

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def host_of(self, broker_id: int) -> str:
        return self.brokers[broker_id].host

    def seen_by(self, broker_id: int, topic: str | None = None) -> BrokerSight | None:
        """What broker `broker_id` itself reports (its side of a partition): the brokers and
        controller it knows, `topic`'s leaders and ISRs; None when it does not answer."""
        try:
            md = self._metadata(broker_id, [topic] if topic else [])
        except (OSError, ValueError):
            return None
        return BrokerSight({b.node_id for b in md.brokers}, md.controller_id, {
            p.partition_index: PartitionSight(p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes))
            for t in md.topics if t.error_code == 0 for p in t.partitions})

    def whole(self, topic: str) -> bool:
        """Every broker answers and reports the same: every broker, one controller, and for
        each partition of `topic` one leader and every replica in sync. (A client's view is
        one broker's, and a broker just back from a partition still reports what it knew
        before it: all of them are asked.)"""
        sights = [self.seen_by(b, topic) for b in self.brokers]
        first = sights[0]
        if first is None or not first.partitions or first.controller < 0:
            return False
        return all(s == first for s in sights) and first.brokers == set(self.brokers) and all(
            p.leader >= 0 and p.isr == p.replicas for p in first.partitions.values())

    # ---- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the brokers and ZooKeeper, remove the namespaces, and the data unless it was
        a --data-dir. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            for proc in self._procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)    # a stopped process dies of it too
                    proc.wait(10)
            if self.zookeeper is not None:
                self.zookeeper.kill()
        finally:
            self.network.close()
            if not self.keep_data:
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "NetnsCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
