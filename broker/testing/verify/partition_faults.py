"""strom-verify's network partitions: fault kinds for a cluster it started itself in network
namespaces (`--netns-cluster N`, `netns_cluster.py`), placed by role (a random partition's
leader and followers, the controller) and healed when the fault ends.

Cuts are between hosts (ZooKeeper's and the brokers'), never between strom-verify's clients and
a broker: the producer still reaches a cut-off leader, as clients on both sides of a real
partition do. So the check is not that a cut-off leader is out of reach, but that it does not
acknowledge: it cannot shrink its ISR without ZooKeeper, so acks=all waits (and times out)
there, and the producer goes on with the leader the majority elects once it learns of it (its
Metadata requests go to a random broker; the cut-off one still names itself).

Every kind ends the same way: the network healed, then until every broker reports every broker
live, the same controller and leaders, and every replica of the topic in sync (the cut-off
broker re-registered, truncated what it alone had and caught up), so the next fault begins on
a whole cluster. Before the heal it says what
the other side made of it (a new leader, a shrunk ISR, a new controller), as one broker there
reports it.
"""
from __future__ import annotations

import time

from broker.testing.verify.faults import Fault, FaultContext, register
from broker.testing.verify.local_cluster import ClusterError
from broker.testing.verify.netns_cluster import ZK_HOST, NetnsCluster


def hosts(ctx: FaultContext, kind: str) -> NetnsCluster:
    if ctx.network is None:
        raise ClusterError(f"fault kind {kind} needs a cluster in network namespaces "
                           f"(--netns-cluster N)")
    return ctx.network


class Roles:
    """A random partition with a leader whose followers all run: the partition, its leader,
    its followers (replica order) and one of them drawn."""

    def __init__(self, ctx: FaultContext):
        running = set(ctx.running_brokers())
        parts = [p for p in ctx.view.until("the topic's partitions", ctx.view.partitions,
                                           ctx.heal_timeout)
                 if p.leader >= 0 and len(p.replicas) >= 3 and set(p.replicas) <= running]
        if not parts:
            raise RuntimeError("no partition with a leader and two running followers to cut")
        part = ctx.rng.choice(parts)
        self.partition = part.partition
        self.leader = part.leader
        self.followers = [r for r in part.replicas if r != part.leader]
        self.follower = ctx.rng.choice(self.followers)


class PartitionFault(Fault):
    """A cut begun by `cut`, noted from the other side by `observe`, then healed."""

    needs_network = True

    def __init__(self) -> None:
        self.began = 0.0
        self.witness = -1           # a broker on the side that should go on
        self.partition = -1

    def begin(self, ctx: FaultContext) -> str:
        text = self.cut(ctx, hosts(ctx, self.name))
        self.began = time.monotonic()
        return text

    def cut(self, ctx: FaultContext, net: NetnsCluster) -> str:
        raise NotImplementedError

    def observe(self, ctx: FaultContext, net: NetnsCluster) -> str:
        """What the witness reports about the partition just before the heal."""
        sight = net.seen_by(self.witness, ctx.view.topic)
        if sight is None:
            return f"broker {self.witness} did not answer; "
        part = sight.partitions.get(self.partition)
        leader, isr = (part.leader, part.isr) if part is not None else (-1, [])
        return (f"after {time.monotonic() - self.began:.1f}s broker {self.witness} reports "
                f"partition {self.partition} led by {leader if leader >= 0 else 'nobody'}, "
                f"ISR {isr}; ")

    def end(self, ctx: FaultContext) -> str:
        net = hosts(ctx, self.name)
        seen = self.observe(ctx, net)
        net.network.heal()
        healed = time.monotonic()
        ctx.view.until("every broker reporting every broker, one controller, one leader of "
                       "each partition and every replica in sync",
                       lambda: net.whole(ctx.view.topic), ctx.heal_timeout)
        return (f"{seen}healed: every broker reports every broker live and every replica in "
                f"sync {time.monotonic() - healed:.1f}s later")


@register
class IsolateLeader(PartitionFault):
    name = "isolate-leader"
    summary = ("cut a partition leader's host off from ZooKeeper and every other broker (clients "
               "still reach it: it must acknowledge nothing; the others elect once its session "
               "expires); heal when the fault ends")

    def cut(self, ctx: FaultContext, net: NetnsCluster) -> str:
        roles = Roles(ctx)
        self.partition, self.witness = roles.partition, roles.followers[0]
        net.network.isolate(net.host_of(roles.leader))
        return (f"leader {roles.leader} of partition {roles.partition} cut from ZooKeeper and "
                f"the other brokers (clients still reach it)")


@register
class IsolateFollower(PartitionFault):
    name = "isolate-follower"
    summary = ("cut a follower's host off from ZooKeeper and every other broker (its leader "
               "shrinks the ISR and goes on); heal when the fault ends (it rejoins)")

    def cut(self, ctx: FaultContext, net: NetnsCluster) -> str:
        roles = Roles(ctx)
        self.partition, self.witness = roles.partition, roles.leader
        net.network.isolate(net.host_of(roles.follower))
        return (f"follower {roles.follower} of partition {roles.partition} (leader {roles.leader}) cut "
                f"from ZooKeeper and the other brokers")


@register
class CutControllerZk(PartitionFault):
    name = "cut-controller-zk"
    summary = ("cut the controller's host off from ZooKeeper only (it still reaches the brokers "
               "and clients: its session expires, another broker becomes controller); heal when "
               "the fault ends")

    def __init__(self) -> None:
        super().__init__()
        self.controller = -1

    def cut(self, ctx: FaultContext, net: NetnsCluster) -> str:
        def known() -> tuple[int] | None:
            controller = ctx.view.controller()
            return (controller,) if controller >= 0 else None

        self.controller = ctx.view.until("a controller", known, ctx.heal_timeout)[0]
        self.witness = next(b for b in ctx.cluster.broker_ids() if b != self.controller)
        net.network.cut(net.host_of(self.controller), ZK_HOST)
        return f"controller {self.controller} cut from ZooKeeper (it still reaches the brokers)"

    def observe(self, ctx: FaultContext, net: NetnsCluster) -> str:
        sight = net.seen_by(self.witness, ctx.view.topic)
        if sight is None:
            return f"broker {self.witness} did not answer; "
        return (f"after {time.monotonic() - self.began:.1f}s broker {self.witness} reports "
                f"controller {sight.controller}; ")


@register
class OneWay(PartitionFault):
    name = "one-way"
    summary = ("drop one direction between a partition leader and a follower (which one is "
               "drawn), the other way open; heal when the fault ends")

    def cut(self, ctx: FaultContext, net: NetnsCluster) -> str:
        roles = Roles(ctx)
        src, dst = ((roles.leader, roles.follower) if ctx.rng.random() < 0.5
                    else (roles.follower, roles.leader))
        self.partition, self.witness = roles.partition, roles.leader
        net.network.cut_one_way(net.host_of(src), net.host_of(dst))
        return (f"broker {src}'s packets to broker {dst} dropped, the other way open (partition "
                f"{roles.partition}, leader {roles.leader})")


@register
class Bridge(PartitionFault):
    name = "bridge"
    summary = ("Jepsen's bridge: a partition leader on one side, ZooKeeper and the other brokers "
               "on the other, one follower (drawn) seeing both; heal when the fault ends")

    def cut(self, ctx: FaultContext, net: NetnsCluster) -> str:
        roles = Roles(ctx)
        middle = roles.follower
        far = [b for b in ctx.cluster.broker_ids() if b not in (roles.leader, middle)]
        self.partition, self.witness = roles.partition, far[0]
        net.network.bridge([net.host_of(roles.leader)], net.host_of(middle),
                           [ZK_HOST, *map(net.host_of, far)])
        return (f"leader {roles.leader} of partition {roles.partition} | ZooKeeper and brokers "
                f"{far}, broker {middle} seeing both")
