"""ElectLeaders (KIP-460): a preferred or unclean leader election the operator asks for
(`kafka-leader-election.sh`, AdminClient.electLeaders).

As Kafka: ALTER on the Cluster (CLUSTER_AUTHORIZATION_FAILED in every result otherwise);
the controller decides and writes the new partition states, any other broker answers
NOT_CONTROLLER; the answer waits (up to the request's timeout) until this broker's metadata
shows the leaders elected, as Kafka's DelayedElectLeader; a request for every partition
(null topic list) is answered with only the partitions that were elected or failed, never
those already led by the right replica (ELECTION_NOT_NEEDED).
"""
from __future__ import annotations

import asyncio
from typing import Protocol

from clients.protocol.acl import AclOperation
from clients.protocol.errors import Code
from zkcoord.controller import PREFERRED_ELECTION, UNCLEAN_ELECTION, Controller, ElectionResult

from ...metadata_cache import MetadataCache
from ...security.authorizer import Authorizer
from ..authz import cluster_authorized
from ..dispatch import RequestContext, handles

TopicPartition = tuple[str, int]
# How often the answer looks at the metadata cache for the elected leaders.
_CACHE_POLL_S = 0.02


class ElectLeadersServices(Protocol):
    broker_id: int
    cluster_mode: bool
    metadata: MetadataCache
    controller: Controller | None
    authorizer: Authorizer


def _requested(request) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


def _response(results: dict[TopicPartition, ElectionResult], code: int = Code.NONE) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), (err, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": err, "error_message": message})
    return {"error_code": code, "replica_election_results": [
        {"topic": t, "partition_result": parts} for t, parts in by_topic.items()]}


def _standalone(services: ElectLeadersServices, partitions: list[TopicPartition] | None
                ) -> dict[TopicPartition, ElectionResult]:
    """One broker leads every partition: no election is ever needed."""
    known = set(services.metadata.partitions)
    wanted = known if partitions is None else partitions
    return {tp: ((Code.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                 if tp in known else
                 (Code.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."))
            for tp in wanted}


async def _until_cached(metadata: MetadataCache, leaders: dict[TopicPartition, int], timeout_s: float) -> None:
    """Until this broker's metadata shows every elected leader (the controller's
    UpdateMetadata reached it) or `timeout_s` passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while leaders and loop.time() < deadline:
        leaders = {tp: b for tp, b in leaders.items()
                   if (info := metadata.partition(*tp)) is None or info.leader != b}
        if leaders:
            await asyncio.sleep(_CACHE_POLL_S)


@handles("ElectLeaders", (0, 2))
async def elect_leaders(services: ElectLeadersServices, request, ctx: RequestContext) -> dict:
    partitions = _requested(request)
    election_type = request.election_type if ctx.version >= 1 else PREFERRED_ELECTION
    if not cluster_authorized(services, ctx, AclOperation.ALTER):
        denied = (Code.CLUSTER_AUTHORIZATION_FAILED, None)
        return _response({tp: denied for tp in partitions or []}, Code.CLUSTER_AUTHORIZATION_FAILED)
    if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
        return _response({}, Code.INVALID_REQUEST)
    if not services.cluster_mode:
        results = _standalone(services, partitions)
    else:
        controller = services.controller
        answered = await controller.elect_leaders(election_type, partitions) if controller is not None else None
        if controller is None or answered is None:
            # As Kafka's broker: every partition asked (null: every one it knows) NOT_CONTROLLER.
            asked = list(services.metadata.partitions) if partitions is None else partitions
            return _response({tp: (Code.NOT_CONTROLLER, None) for tp in asked})
        results = answered
        elected = [tp for tp, (err, _) in results.items() if err == Code.NONE]
        states = controller.states
        await _until_cached(services.metadata, {tp: states[tp].state.leader for tp in elected if tp in states},
                            max(request.timeout_ms, 0) / 1000.0)
    if partitions is None:
        results = {tp: r for tp, r in results.items() if r[0] != Code.ELECTION_NOT_NEEDED}
    return _response(results)
