"""Confluent's v3 consumer group routes: groups, their consumers, and lags (per partition
and the group's summary).

As Confluent's managers do: a group is what DescribeGroups describes, except one the
coordinator does not know (GROUP_ID_NOT_FOUND, or the "Dead" description of a group without
a protocol), which is 404. Lags pair the group's committed offsets with each partition's
log end under read_committed (ListOffsets); a partition's consumer is the member whose
assignment holds it ("" and null when none does). A group without committed offsets has no
lags: 404 "Consumer group offsets could not be found.".

The coordinator link is the broker that answered DescribeGroups (`GroupDescription.coordinator`).
"""
from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from clients.aio.admin import GroupDescription, MemberDescription
from clients.protocol.errors import Code, KafkaError
from clients.rest.kafka import ClientPool
from clients.rest.v3_admin_common import (CLUSTER_COULD_NOT, AdminCall, Links, begin, collection,
                                          kafka_error, not_found, resource_metadata)
from clients.types import TopicPartition

__all__ = ["ConsumerGroupRoutes"]

GROUP = "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}"
# Kafka's group state names -> Confluent's ConsumerGroup.State.
_STATES = {"PreparingRebalance": "PREPARING_REBALANCE",
           "CompletingRebalance": "COMPLETING_REBALANCE", "Stable": "STABLE", "Dead": "DEAD",
           "Empty": "EMPTY", "Assigning": "ASSIGNING", "Reconciling": "RECONCILING"}
_CONSUMER_PROTOCOLS = ("consumer", "")     # what Kafka's listConsumerGroups keeps


def group_data(links: Links, g: GroupDescription) -> dict[str, Any]:
    gid = g.group_id
    return {
        "kind": "KafkaConsumerGroup",
        "metadata": resource_metadata(links.url("consumer-groups", gid),
                                      links.crn("consumer-group", gid)),
        "cluster_id": links.cluster_id,
        "consumer_group_id": gid,
        "is_simple": g.protocol_type == "",
        "partition_assignor": g.protocol,
        "state": _STATES.get(g.state, "UNKNOWN"),
        "coordinator": links.related("brokers", g.coordinator),
        "consumers": links.related("consumer-groups", gid, "consumers"),
        "lag_summary": links.related("consumer-groups", gid, "lag-summary"),
    }


def consumer_data(links: Links, group_id: str, m: MemberDescription) -> dict[str, Any]:
    here = ("consumer-groups", group_id, "consumers", m.member_id)
    return {
        "kind": "KafkaConsumer",
        "metadata": resource_metadata(
            links.url(*here), links.crn("consumer-group", group_id, "consumer", m.member_id)),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "consumer_id": m.member_id,
        "instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "assignments": links.related(*here, "assignments"),
    }


class Lag:
    """One partition's lag in a group, with the member it is assigned to (if any)."""

    def __init__(self, tp: TopicPartition, current: int, end: int,
                 member: MemberDescription | None):
        self.tp = tp
        self.current = current
        self.end = end
        self.lag = end - current
        self.consumer_id = member.member_id if member else ""
        self.instance_id = member.group_instance_id if member else None
        self.client_id = member.client_id if member else ""

    def data(self, links: Links, group_id: str) -> dict[str, Any]:
        t, p = self.tp.topic, self.tp.partition
        return {
            "kind": "KafkaConsumerLag",
            "metadata": resource_metadata(
                links.url("consumer-groups", group_id, "lags", t, "partitions", p),
                links.crn("consumer-group", group_id, "lag", t, "partition", p)),
            "cluster_id": links.cluster_id,
            "consumer_group_id": group_id,
            "topic_name": t,
            "partition_id": p,
            "current_offset": self.current,
            "log_end_offset": self.end,
            "lag": self.lag,
            "consumer_id": self.consumer_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
        }


def lag_summary_data(links: Links, group_id: str, lags: list[Lag]) -> dict[str, Any]:
    """Max and total lag; negative lags count as 0 and the first partition (by topic, then
    partition) holding the max is the one named, as Confluent's summary builder keeps the
    first it meets."""
    top = max(sorted(lags, key=lambda x: x.tp), key=lambda x: max(0, x.lag))
    return {
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": resource_metadata(links.url("consumer-groups", group_id, "lag-summary"),
                                      links.crn("consumer-group", group_id, "lag-summary")),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "max_lag_consumer_id": top.consumer_id,
        "max_lag_instance_id": top.instance_id,
        "max_lag_client_id": top.client_id,
        "max_lag_topic_name": top.tp.topic,
        "max_lag_partition_id": top.tp.partition,
        "max_lag": max(0, top.lag),
        "total_lag": sum(max(0, x.lag) for x in lags),
        "max_lag_consumer": links.related("consumer-groups", group_id, "consumers",
                                          top.consumer_id),
        "max_lag_partition": links.related("topics", top.tp.topic, "partitions", top.tp.partition),
    }


class ConsumerGroupRoutes:
    def __init__(self, pool: ClientPool):
        self.pool = pool

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v3/clusters/{cluster_id}/consumer-groups", self.list_groups),
            web.get(GROUP, self.get_group),
            web.get(GROUP + "/consumers", self.list_consumers),
            web.get(GROUP + "/consumers/{consumer_id}", self.get_consumer),
            web.get(GROUP + "/lag-summary", self.get_lag_summary),
            web.get(GROUP + "/lags", self.list_lags),
            web.get(GROUP + "/lags/{topic_name}/partitions/{partition_id}", self.get_lag),
        ]

    async def close(self) -> None:
        pass

    # ------------------------------------------------------------------ lookups

    async def _group(self, call: AdminCall, group_id: str) -> GroupDescription | None:
        """The group's description; None for a group the cluster does not have."""
        try:
            g = (await call.clients.admin.describe_groups([group_id]))[group_id]
        except KafkaError as e:
            if e.code == Code.GROUP_ID_NOT_FOUND:
                return None
            raise kafka_error(e, f"group {group_id}") from e
        return None if g.state == "Dead" and g.protocol_type == "" else g

    async def _existing_group(self, call: AdminCall, group_id: str, missing: str
                              ) -> GroupDescription:
        g = await self._group(call, group_id)
        if g is None:
            raise not_found(missing.format(group_id))
        return g

    async def _lags(self, call: AdminCall, g: GroupDescription) -> list[Lag]:
        admin = call.clients.admin
        try:
            committed = await admin.list_group_offsets(g.group_id)
        except KafkaError as e:
            raise kafka_error(e, f"group {g.group_id}") from e
        if not committed:
            raise not_found("Consumer group offsets could not be found.")
        try:
            ends = await admin.list_offsets({tp: "latest" for tp in committed},
                                            isolation_level="read_committed")
        except KafkaError as e:
            raise kafka_error(e) from e
        owner = {tp: m for m in g.members for tp in m.assignment}
        return [Lag(tp, committed[tp].offset, ends[tp].offset, owner.get(tp))
                for tp in sorted(committed) if tp in ends]

    # ------------------------------------------------------------------ groups, consumers

    async def list_groups(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        listed = await call.clients.admin.list_groups()
        ids = sorted(x.group_id for x in listed if x.protocol_type in _CONSUMER_PROTOCOLS)
        groups = await asyncio.gather(*(self._group(call, gid) for gid in ids))
        found = [g for g in groups if g is not None]
        data = [group_data(call.links, g) for g in found]
        return call.ok(collection("KafkaConsumerGroupList", call.links.url("consumer-groups"),
                                  data))

    async def get_group(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        g = await self._existing_group(call, request.match_info["consumer_group_id"],
                                       "HTTP 404 Not Found")
        return call.ok(group_data(call.links, g))

    async def list_consumers(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        gid = request.match_info["consumer_group_id"]
        g = await self._existing_group(call, gid, "Consumer Group {} does not exist.")
        data = [consumer_data(call.links, gid, m) for m in g.members]
        return call.ok(collection("KafkaConsumerList",
                                  call.links.url("consumer-groups", gid, "consumers"), data))

    async def get_consumer(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        gid = request.match_info["consumer_group_id"]
        g = await self._existing_group(call, gid, "Consumer Group {} does not exist.")
        for m in g.members:
            if m.member_id == request.match_info["consumer_id"]:
                return call.ok(consumer_data(call.links, gid, m))
        raise not_found()

    # ------------------------------------------------------------------ lags

    async def list_lags(self, request: web.Request) -> web.Response:
        """Every partition the group committed, the largest lag first (then by topic and
        partition), as Confluent sorts them."""
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        gid = request.match_info["consumer_group_id"]
        lags = await self._lags(call, await self._existing_group(
            call, gid, "Consumer Group {} could not be found."))
        if not lags:
            raise not_found("Consumer lags not found.")
        lags.sort(key=lambda x: (-x.lag, x.tp.topic, x.tp.partition))
        return call.ok(collection("KafkaConsumerLagList",
                                  call.links.url("consumer-groups", gid, "lags"),
                                  [x.data(call.links, gid) for x in lags]))

    async def get_lag(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        gid = request.match_info["consumer_group_id"]
        try:
            wanted = TopicPartition(request.match_info["topic_name"],
                                    int(request.match_info["partition_id"]))
        except ValueError:
            raise not_found() from None
        lags = await self._lags(call, await self._existing_group(
            call, gid, "Consumer Group {} could not be found."))
        for lag in lags:
            if lag.tp == wanted:
                return call.ok(lag.data(call.links, gid))
        raise not_found()

    async def get_lag_summary(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_COULD_NOT)
        gid = request.match_info["consumer_group_id"]
        lags = await self._lags(call, await self._existing_group(
            call, gid, "Consumer Group {} could not be found."))
        if not lags:
            raise not_found()
        return call.ok(lag_summary_data(call.links, gid, lags))
