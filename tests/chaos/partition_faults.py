"""Network partitions of a `Cluster` running in network namespaces (broker/testing/netns.py),
by role: the fault functions look up the partition's leader, its followers and the controller
in ZooKeeper, cut the network accordingly and say what they did.

Clients are on both sides, as in a real partition: the test process has two addresses on the
network, CLIENT (what its sockets use unless they bind another: producers, consumers, the
cluster's probes and its ZooKeeper client) and MINORITY (bound by a test's own sockets).
Faults that cut brokers off from ZooKeeper leave CLIENT with ZooKeeper and put MINORITY with
the cut-off brokers, so a test can keep writing to a deposed leader through MINORITY (it must
acknowledge nothing) while its producers go on with the majority. Faults between brokers only
(the controller from ZooKeeper, one-way) cut no client. Why CLIENT goes with the majority: a
client that reaches only a deposed leader learns nothing new from it (its metadata still names
itself, in Kafka too), so it waits for the heal, safely but without progress.

    with netns_cluster(tmp_path / "c") as c:
        fault = isolate_leader(c, "t")        # a PartitionFault: what was cut, and who
        ...
        heal(c)

`FAULTS` names them all for a soak to draw from (`draw(c, topic, rng)`).
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from broker.testing.netns import CLIENT, Network
from tests.support.cluster import ZK_HOST, Cluster

MINORITY = "minority"       # the client address that goes with the cut-off side


@dataclass
class PartitionFault:
    kind: str
    description: str
    leader: int | None                  # the partition's leader when the cut began
    cut_from_zookeeper: list[int] = field(default_factory=list)  # their sessions will expire

    def __str__(self) -> str:
        return f"{self.kind}: {self.description}"


@contextlib.contextmanager
def netns_cluster(workdir: Path, brokers: int = 3, **kwargs: Any) -> Iterator[Cluster]:
    """A started Cluster with ZooKeeper and every broker on hosts of a fresh Network; the
    cluster is stopped and the network removed on the way out, whatever happened."""
    net = Network.create(Cluster.host_names(brokers), extra_clients=[MINORITY])
    try:
        c = Cluster(workdir, brokers, network=net, **kwargs)
        try:
            c.start()
            yield c
        finally:
            c.stop()
    finally:
        net.close()


def network(c: Cluster) -> Network:
    if c.network is None:
        raise ValueError("the cluster does not run in network namespaces (Cluster(network=...))")
    return c.network


def host(i: int) -> str:
    return Cluster.broker_host(i)


def minority_address(c: Cluster) -> str:
    """The address a socket binds to be a client on the cut-off side."""
    return network(c).ip(MINORITY)


def cut_off(c: Cluster, brokers: list[int], reject: bool = False) -> None:
    """`brokers` (with MINORITY) cut from ZooKeeper, the other brokers and CLIENT."""
    rest = [host(i) for i in range(c.size) if i not in brokers]
    network(c).partition([*map(host, brokers), MINORITY], [ZK_HOST, *rest, CLIENT], reject)


def _how(reject: bool) -> str:
    return " (refused)" if reject else ""


def roles(c: Cluster, topic: str, partition: int) -> tuple[int, list[int], int | None]:
    """(leader, its followers in replica order, controller) from ZooKeeper."""
    leader = c.wait_for_leader(topic, partition, timeout=30)
    replicas = c.replicas(topic, partition)
    return leader, [r for r in replicas if r != leader], c.controller_id()


def isolate_leader(c: Cluster, topic: str, partition: int = 0, reject: bool = False) -> PartitionFault:
    """The leader cut from ZooKeeper, every other broker and CLIENT."""
    leader, _, _ = roles(c, topic, partition)
    cut_off(c, [leader], reject)
    return PartitionFault("isolate-leader", f"leader {leader} of {topic}-{partition} cut from "
                          f"ZooKeeper and the other brokers{_how(reject)}", leader, [leader])


def isolate_follower(c: Cluster, topic: str, partition: int = 0, rng: random.Random | None = None,
                     victim: int | None = None, reject: bool = False) -> PartitionFault:
    """A follower cut from ZooKeeper, every other broker and CLIENT: `victim`, else one drawn by
    `rng`, else the first that is not the controller."""
    leader, followers, controller = roles(c, topic, partition)
    if victim is None:
        plain = [f for f in followers if f != controller] or followers
        victim = rng.choice(followers) if rng is not None else plain[0]
    assert victim in followers, f"broker {victim} does not follow {topic}-{partition}"
    cut_off(c, [victim], reject)
    return PartitionFault("isolate-follower", f"follower {victim} of {topic}-{partition} cut from "
                          f"ZooKeeper and the other brokers{_how(reject)}", leader, [victim])


def cut_controller_from_zookeeper(c: Cluster, topic: str, partition: int = 0,
                                  reject: bool = False) -> PartitionFault:
    """The controller cut from ZooKeeper only: it still reaches every broker and client."""
    controller = c.wait_for_controller(timeout=30)
    leader = c.leader(topic, partition)
    network(c).cut(host(controller), ZK_HOST, reject)
    return PartitionFault("controller-zookeeper", f"controller {controller} cut from ZooKeeper{_how(reject)} "
                          f"(leader of {topic}-{partition}: {leader})", leader, [controller])


def cut_controller_from_brokers(c: Cluster, topic: str, partition: int = 0,
                                reject: bool = False) -> PartitionFault:
    """The controller cut from every other broker only: it keeps its ZooKeeper session (so
    stays controller) and its clients, but its requests to the brokers are lost."""
    controller = c.wait_for_controller(timeout=30)
    others = [host(i) for i in range(c.size) if i != controller]
    network(c).partition([host(controller)], others, reject)
    return PartitionFault("controller-brokers", f"controller {controller} cut from the other brokers{_how(reject)} "
                          f"(leader of {topic}-{partition}: {c.leader(topic, partition)})",
                          c.leader(topic, partition))


def one_way(c: Cluster, topic: str, partition: int = 0, leader_to_follower: bool = True,
            follower: int | None = None, reject: bool = False) -> PartitionFault:
    """Packets one way between the leader and a follower (`follower`, else the first that
    is not the controller) dropped: the leader's to the follower, or the follower's to the
    leader. TCP needs both ways, so their connections stall, but a request may still arrive
    where its answer cannot return."""
    leader, followers, controller = roles(c, topic, partition)
    if follower is None:
        follower = ([f for f in followers if f != controller] or followers)[0]
    src, dst = (leader, follower) if leader_to_follower else (follower, leader)
    network(c).cut_one_way(host(src), host(dst), reject)
    return PartitionFault("one-way", f"broker {src}'s packets to broker {dst} "
                          f"{'refused' if reject else 'dropped'} (leader of "
                          f"{topic}-{partition}: {leader}), the other way open", leader)


def bridge(c: Cluster, topic: str, partition: int = 0, middle: int | None = None,
           rng: random.Random | None = None, reject: bool = False) -> PartitionFault:
    """Jepsen's bridge: the leader (and MINORITY) on one side, ZooKeeper and one follower (and
    CLIENT) on the other, the other follower seeing both sides: `middle`, else one drawn by
    `rng`, else the controller if it follows, else the first."""
    leader, followers, controller = roles(c, topic, partition)
    if middle is None:
        middle = rng.choice(followers) if rng is not None else \
            controller if controller in followers else followers[0]
    assert middle in followers, f"broker {middle} does not follow {topic}-{partition}"
    far = next(f for f in followers if f != middle)
    network(c).bridge([host(leader), MINORITY], host(middle), [ZK_HOST, host(far), CLIENT], reject)
    return PartitionFault("bridge", f"leader {leader} | ZooKeeper and broker {far}, broker {middle} "
                          f"seeing both ({topic}-{partition}){_how(reject)}", leader, [leader])


def zookeeper_minority(c: Cluster, topic: str, partition: int = 0, with_leader: bool = False,
                       reject: bool = False) -> PartitionFault:
    """ZooKeeper and one broker (the leader, or a follower) on one side, the other two brokers
    (and MINORITY) on the other: neither side has both a majority of the replicas and
    ZooKeeper, so acks=all must stop until the heal."""
    leader, followers, _ = roles(c, topic, partition)
    alone = leader if with_leader else followers[0]
    others = [i for i in range(c.size) if i != alone]
    network(c).partition([*map(host, others), MINORITY], [ZK_HOST, host(alone), CLIENT], reject)
    return PartitionFault("zookeeper-minority", f"ZooKeeper with broker {alone} only{_how(reject)} "
                          f"(leader of {topic}-{partition}: {leader})", leader, others)


def heal(c: Cluster) -> None:
    network(c).heal()


# (cluster, topic, partition, rng, reject) -> the fault done
FaultFn = Callable[[Cluster, str, int, random.Random, bool], PartitionFault]

FAULTS: dict[str, FaultFn] = {
    "isolate-leader": lambda c, t, p, rng, rej: isolate_leader(c, t, p, reject=rej),
    "isolate-follower": lambda c, t, p, rng, rej: isolate_follower(c, t, p, rng=rng, reject=rej),
    "controller-zookeeper": lambda c, t, p, rng, rej: cut_controller_from_zookeeper(c, t, p, reject=rej),
    "controller-brokers": lambda c, t, p, rng, rej: cut_controller_from_brokers(c, t, p, reject=rej),
    "one-way": lambda c, t, p, rng, rej: one_way(c, t, p, leader_to_follower=rng.random() < 0.5,
                                                 follower=rng.choice(roles(c, t, p)[1]), reject=rej),
    "bridge": lambda c, t, p, rng, rej: bridge(c, t, p, rng=rng, reject=rej),
    "zookeeper-minority": lambda c, t, p, rng, rej: zookeeper_minority(c, t, p, with_leader=rng.random() < 0.5,
                                                                       reject=rej),
}

REJECT_SHARE = 0.25     # of drawn faults that refuse (a rejecting firewall) instead of dropping


def draw(c: Cluster, topic: str, rng: random.Random, partition: int = 0,
         reject: bool | None = None) -> PartitionFault:
    """One partition fault drawn at random, placed by the roles of `topic`'s `partition`,
    dropping or (`reject`, else drawn: REJECT_SHARE) refusing; `heal(c)` ends it (faults add
    up until then)."""
    kind = rng.choice(sorted(FAULTS))
    return FAULTS[kind](c, topic, partition, rng, rng.random() < REJECT_SHARE if reject is None else reject)
