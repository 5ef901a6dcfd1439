"""DescribeLogDirs and AlterReplicaLogDirs: this broker's log dirs and the replicas in
them (KIP-112, KIP-113), as Kafka's KafkaApis and ReplicaManager answer them.

DescribeLogDirs needs DESCRIBE on the Cluster (else CLUSTER_AUTHORIZATION_FAILED and no
dirs); every log dir is listed, an offline one with KAFKA_STORAGE_ERROR and nothing else,
an online one with the size of each replica asked for (null: all), the offset lag of a
future replica (one moving into the dir) behind its current one, and (v4) the file
system's total and usable bytes. AlterReplicaLogDirs needs ALTER on the Cluster; each
partition is answered on its own (ReplicaManager.alter_replica_log_dir).
"""
from __future__ import annotations

from typing import Protocol

from clients.protocol.acl import AclOperation
from clients.protocol.errors import Code

from ...replication.replica_manager import ReplicaManager
from ...security.authorizer import Authorizer
from ..authz import cluster_authorized
from ..dispatch import RequestContext, handles


class LogDirServices(Protocol):
    replicas: ReplicaManager
    authorizer: Authorizer


@handles("DescribeLogDirs", (0, 4))
def describe_log_dirs(services: LogDirServices, request, ctx: RequestContext) -> dict:
    if not cluster_authorized(services, ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": Code.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted = None
    if request.topics is not None:
        asked = {(t.topic, p) for t in request.topics for p in t.partitions}
        wanted = lambda topic, partition: (topic, partition) in asked  # noqa: E731
    results = []
    for d in services.replicas.logs.describe_dirs(wanted):
        if d.error is not None:
            results.append({"error_code": Code.KAFKA_STORAGE_ERROR, "log_dir": d.path, "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        topics: dict[str, list[dict]] = {}
        for r in d.replicas:
            topics.setdefault(r.topic, []).append({
                "partition_index": r.partition, "partition_size": r.size,
                "offset_lag": r.offset_lag, "is_future_key": r.is_future})
        results.append({"error_code": Code.NONE, "log_dir": d.path,
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                        "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes})
    return {"throttle_time_ms": 0, "error_code": Code.NONE, "results": results}


@handles("AlterReplicaLogDirs", (0, 2))
def alter_replica_log_dirs(services: LogDirServices, request, ctx: RequestContext) -> dict:
    # Kafka keys the request by partition: a partition named under two dirs goes to the last.
    target: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                target[(t.name, p)] = d.path
    allowed = cluster_authorized(services, ctx, AclOperation.ALTER)
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), path in target.items():
        code = (services.replicas.alter_replica_log_dir(topic, partition, path) if allowed
                else Code.CLUSTER_AUTHORIZATION_FAILED)
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
