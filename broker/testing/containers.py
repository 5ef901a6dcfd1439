"""strom in Docker containers, for tests, in the style of testcontainers' `KafkaContainer`:

    from broker.testing.containers import StromContainer, StromClusterContainer

    with StromContainer() as strom:                       # one standalone broker
        Producer({"bootstrap.servers": strom.get_bootstrap_server()})

    with StromClusterContainer(brokers=3) as cluster:     # ZooKeeper + 3 brokers
        cluster.get_bootstrap_server()
        cluster.disconnect(cluster.leader("t", 0))        # cut a broker off the network
        cluster.reconnect(...)

The image is built on the Docker host with `bin/build-image.sh` (nothing is pulled; see
container_support for Ryuk, which needs a pulled image and is turned off when it is not
there). `StromContainer` works wherever testcontainers does: clients reach it on the port
Docker mapped. `StromClusterContainer`'s brokers are reached on their addresses on the
cluster's Docker network, which the Docker host routes: the test must run on the (Linux)
Docker host itself.
"""
from __future__ import annotations

import time
from functools import partial
from typing import Any, Iterable

from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from typing_extensions import Self

from .container_support import (broker_metadata, default_image, docker_client, owner_labels,
                                pinnable_network, require_image, settle_ryuk, wait_until)

BROKER_PORT = 9092            # PLAINTEXT: the clients' listener
INTERNAL_PORT = 9093          # BROKER: StromContainer's listener for other containers
ZOOKEEPER_PORT = 2181
LATE_PROPERTIES = "/etc/strom/late.properties"


def kafka_env(config: dict[str, str]) -> dict[str, str]:
    """Broker keys as the image's KAFKA_<KEY> environment variables ('.' -> '_', '_' -> '__',
    '-' -> '___', upper case), which its entry point turns back into keys."""
    return {"KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper(): value
            for key, value in config.items()}


def _exited(container: DockerContainer) -> str | None:
    """Why waiting for `container` is pointless: it exited (with the end of its output)."""
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    if wrapped.status in ("exited", "dead"):
        return f"container exited:\n{wrapped.logs(tail=40).decode(errors='replace')}"
    return None


def _address_on(container: DockerContainer, network: str | None = None) -> str:
    """The container's IP address on `network` (its first network when None)."""
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    networks = wrapped.attrs["NetworkSettings"]["Networks"]
    info = networks[network] if network else next(iter(networks.values()))
    return str(info["IPAddress"])


class StromContainer(DockerContainer):
    """A standalone strom broker in a container.

    Clients on the Docker host use `get_bootstrap_server()`: the PLAINTEXT listener is
    advertised as testcontainers' host address and the port Docker mapped 9092 to (written
    into the container once known; the broker waits for it). Containers on the same Docker
    network use `get_internal_bootstrap_server()` (the BROKER listener on 9093).

    `broker_config` / `with_broker_config(key, value)`: server.properties keys, winning over
    the image's defaults (log dir /var/lib/strom/data, one replica for internal topics).
    `start_seconds` is how long start() took, readiness included.
    """

    def __init__(self, image: str | None = None, *, broker_config: dict[str, Any] | None = None,
                 start_timeout: float = 60.0, **kwargs: Any):
        labels = {**kwargs.pop("labels", {}), **owner_labels()}
        super().__init__(image or default_image(), labels=labels, **kwargs)
        self.start_timeout = start_timeout
        self.broker_config: dict[str, str] = {
            "listeners": f"PLAINTEXT://0.0.0.0:{BROKER_PORT},BROKER://0.0.0.0:{INTERNAL_PORT}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT",
            "inter.broker.listener.name": "BROKER",
        }
        for key, value in (broker_config or {}).items():
            self.with_broker_config(key, value)
        self.with_exposed_ports(BROKER_PORT)
        self.with_env("STROM_WAIT_FOR_PROPERTIES", LATE_PROPERTIES)
        self.with_command("broker")
        self.start_seconds: float | None = None
        self._bootstrap: str | None = None
        self._internal: str | None = None

    def with_broker_config(self, key: str, value: Any) -> Self:
        self.broker_config[key] = str(value)
        return self

    def start(self) -> Self:
        began = time.monotonic()
        client = self.get_docker_client().client
        require_image(client, self.image)
        settle_ryuk(client)
        super().start()
        host = self.get_container_host_ip()
        port = self.get_exposed_port(BROKER_PORT)
        self._bootstrap = f"{host}:{port}"
        self._internal = f"{_address_on(self)}:{INTERNAL_PORT}"
        config = {**self.broker_config,
                  "advertised.listeners": f"PLAINTEXT://{self._bootstrap},BROKER://{self._internal}"}
        self._write_late_properties(config)

        def advertises_us() -> bool | None:
            md = broker_metadata(host, port)
            return True if any((b.host, b.port) == (host, port) for b in md.brokers) else None

        wait_until(f"strom broker in container {self.get_container_id()[:12]} ready on "
                   f"{self._bootstrap}", advertises_us, self.start_timeout, lambda: _exited(self))
        self.start_seconds = time.monotonic() - began
        return self

    def _write_late_properties(self, config: dict[str, str]) -> None:
        text = "".join(f"{k}={v}\n" for k, v in config.items())
        # Written aside and renamed: the entry point must never read half a file.
        result = self.exec(["sh", "-c", 'printf "%s" "$1" > "$2.tmp" && mv "$2.tmp" "$2"', "sh",
                            text, LATE_PROPERTIES])
        if result.exit_code != 0:
            raise RuntimeError(f"could not configure the broker: {result.output!r}")

    def get_bootstrap_server(self) -> str:
        """host:port for clients on the Docker host."""
        if self._bootstrap is None:
            raise RuntimeError("the container is not started")
        return self._bootstrap

    def get_internal_bootstrap_server(self) -> str:
        """ip:9093 for clients in other containers on the container's network."""
        if self._internal is None:
            raise RuntimeError("the container is not started")
        return self._internal


class StromClusterContainer:
    """ZooKeeper and `brokers` strom brokers, each in its own container, on a Docker network
    of their own. Replication defaults follow Kafka's advice for a safe cluster: replication
    factor min(3, N) for new and internal topics, min.insync.replicas min(2, N).

    Brokers advertise their address on that network (the Docker host routes it), so a broker
    cut off with `disconnect(i)` is unreachable for clients, the other brokers and ZooKeeper
    alike; `reconnect(i)` gives it back its address. `broker_config` adds server.properties
    keys to every broker. ZooKeeper ticks every 500 ms: sessions from 1 s to 10 s.
    """

    def __init__(self, brokers: int = 3, image: str | None = None, *,
                 broker_config: dict[str, Any] | None = None,
                 zookeeper_session_timeout_ms: int = 6000, start_timeout: float = 90.0):
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.image = image or default_image()
        self.size = brokers
        self.start_timeout = start_timeout
        rf, isr = str(min(3, brokers)), str(min(2, brokers))
        self.broker_config: dict[str, str] = {
            "zookeeper.connect": f"zookeeper:{ZOOKEEPER_PORT}/strom",
            "zookeeper.session.timeout.ms": str(zookeeper_session_timeout_ms),
            # A broker may start before ZooKeeper serves: it waits for it.
            "zookeeper.connection.timeout.ms": "60000",
            "default.replication.factor": rf, "min.insync.replicas": isr,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf, "transaction.state.log.min.isr": isr,
            "replica.lag.time.max.ms": "3000",
        }
        self.broker_config.update({k: str(v) for k, v in (broker_config or {}).items()})
        self.zookeeper: DockerContainer | None = None
        self.brokers: list[DockerContainer] = []
        self.start_seconds: float | None = None
        self._network: Network | None = None
        self._docker_network: Any = None     # the same network, as docker's API has it
        self._addresses: list[str] = []      # broker i's IP on the network, kept across cuts

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _container(self, command: str, alias: str, env: dict[str, str]) -> DockerContainer:
        assert self._network is not None
        c = DockerContainer(self.image, labels=owner_labels(), hostname=alias)
        return c.with_command(command).with_envs(**env).with_network(self._network) \
            .with_network_aliases(alias)

    def start(self) -> Self:
        began = time.monotonic()
        client = docker_client()
        require_image(client, self.image)
        settle_ryuk(client)
        self._network = pinnable_network(client)
        self._docker_network = client.networks.get(self._network.id)
        self.zookeeper = self._container("zookeeper", "zookeeper", {
            "ZOO_TICK_TIME": "500", "ZOO_CFG_EXTRA": "forceSync=no preAllocSize=64"})
        self.zookeeper.start()
        for i in range(self.size):
            env = kafka_env({**self.broker_config, "broker.id": str(i)})
            self.brokers.append(self._container("broker", f"broker-{i}", env).start())
        self._addresses = [_address_on(b, self._network.name) for b in self.brokers]
        for i in range(self.size):
            wait_until(f"broker {i} of the cluster in containers sees all {self.size} brokers and "
                       f"a controller", partial(self._sees_everyone, i), self.start_timeout,
                       partial(self._why_down, i))
        self.start_seconds = time.monotonic() - began
        return self

    def _sees_everyone(self, i: int) -> bool | None:
        md = broker_metadata(self._addresses[i], BROKER_PORT)
        return True if len(md.brokers) == self.size and md.controller_id >= 0 else None

    def _why_down(self, i: int) -> str | None:
        return _exited(self.brokers[i]) or _exited(self.zookeeper_container)

    @property
    def zookeeper_container(self) -> DockerContainer:
        if self.zookeeper is None:
            raise RuntimeError("the cluster is not started")
        return self.zookeeper

    def stop(self) -> None:
        for c in [*self.brokers, *([self.zookeeper] if self.zookeeper else [])]:
            try:
                c.stop()
            except Exception:     # already gone: nothing left to remove
                pass
        self.brokers, self.zookeeper = [], None
        if self._network is not None:
            self._network.remove()
            self._network, self._docker_network = None, None

    # ---- addresses ------------------------------------------------------------------------

    def broker_address(self, i: int) -> str:
        """ip:9092 of broker i (= broker.id i)."""
        return f"{self._addresses[i]}:{BROKER_PORT}"

    def get_bootstrap_server(self) -> str:
        return ",".join(self.broker_address(i) for i in range(self.size))

    def partition_state(self, topic: str, partition: int = 0,
                        brokers: Iterable[int] | None = None) -> tuple[int, list[int]] | None:
        """(leader id, ISR) of topic/partition as the first of `brokers` (all by default)
        that answers knows them; None when none answers or knows a leader. A broker cut off
        answers nobody; one just back may still tell what it knew before the cut."""
        for i in range(self.size) if brokers is None else brokers:
            try:
                md = broker_metadata(self._addresses[i], BROKER_PORT, [topic], timeout=1.0)
            except OSError:
                continue
            for t in md.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition and p.leader_id >= 0:
                        return int(p.leader_id), sorted(p.isr_nodes)
        return None

    def leader(self, topic: str, partition: int = 0, timeout: float = 30.0) -> int:
        """The broker id leading topic/partition (waiting up to `timeout` s for one)."""
        state = wait_until(f"a leader of {topic}/{partition}",
                           partial(self.partition_state, topic, partition), timeout)
        return state[0]

    # ---- network faults -------------------------------------------------------------------

    def disconnect(self, i: int) -> None:
        """Cut broker i off the cluster's network: nobody reaches it, it reaches nobody."""
        self._docker_network.disconnect(self.brokers[i].get_wrapped_container(), force=True)

    def reconnect(self, i: int) -> None:
        """Put broker i back on the network with its old address (the one it advertises)."""
        self._docker_network.connect(self.brokers[i].get_wrapped_container(),
                                     ipv4_address=self._addresses[i], aliases=[f"broker-{i}"])
