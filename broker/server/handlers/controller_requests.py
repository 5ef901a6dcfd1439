"""Requests from the controller: LeaderAndIsr, UpdateMetadata, StopReplica (and
ControlledShutdown, from a broker to the controller).

Each needs ClusterAction on the cluster (brokers have it; anyone else is answered
CLUSTER_AUTHORIZATION_FAILED before anything changes). Each carries the controller's epoch;
a request from an older epoch than the newest this broker has seen is refused with
STALE_CONTROLLER_EPOCH, so a deposed controller cannot change leadership (invariant 4).
"""
from __future__ import annotations

import uuid
from typing import Protocol

from clients.protocol.acl import AclOperation
from clients.protocol.errors import Code
from zkcoord.controller import Controller
from zkcoord.store import BrokerInfo, MetadataStore

from ...group.coordinator import GroupCoordinator
from ...group.offsets import OFFSETS_TOPIC
from ...metadata_cache import MetadataCache, PartitionInfo
from ...replication.purgatory import FetchPurgatory
from ...replication.replica_manager import ReplicaManager
from ...security.authorizer import Authorizer
from ...topic_configs import TopicConfigResolver
from ...txn.coordinator import TransactionCoordinator
from ...txn.state_manager import TXN_TOPIC
from ..authz import cluster_authorized, require_cluster
from ..dispatch import RequestContext, handles


class ControllerRequestServices(Protocol):
    broker_id: int
    listener_name: str
    store: MetadataStore
    metadata: MetadataCache
    replicas: ReplicaManager
    purgatory: FetchPurgatory
    topic_configs: TopicConfigResolver
    groups: GroupCoordinator
    txn: TransactionCoordinator
    controller: Controller | None
    authorizer: Authorizer


def _from_a_broker(services: ControllerRequestServices, ctx: RequestContext) -> bool:
    return cluster_authorized(services, ctx, AclOperation.CLUSTER_ACTION)


def _stale(services: ControllerRequestServices, controller_epoch: int) -> bool:
    if controller_epoch < services.replicas.controller_epoch:
        return True
    services.replicas.controller_epoch = controller_epoch
    return False


def _topic_id(services: ControllerRequestServices, name: str, given) -> uuid.UUID:
    if isinstance(given, uuid.UUID) and given.int:
        return given
    meta = services.store.topic(name)
    return meta.topic_id if meta else uuid.UUID(int=0)


@handles("LeaderAndIsr", (0, 7))
def leader_and_isr(services: ControllerRequestServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if v >= 2:
        states = [(t.topic_name, t.topic_id if v >= 5 else None, s)
                  for t in request.topic_states for s in t.partition_states]
    else:
        states = [(s.topic_name, None, s) for s in request.ungrouped_partition_states]
    if not _from_a_broker(services, ctx):
        errors = [(name, tid, s.partition_index, Code.CLUSTER_AUTHORIZATION_FAILED) for name, tid, s in states]
        return _leader_and_isr_response(v, Code.CLUSTER_AUTHORIZATION_FAILED, errors)
    if _stale(services, request.controller_epoch):
        errors = [(name, tid, s.partition_index, Code.STALE_CONTROLLER_EPOCH) for name, tid, s in states]
        return _leader_and_isr_response(v, Code.STALE_CONTROLLER_EPOCH, errors)
    errors = []
    for name, given_id, s in states:
        topic_id = _topic_id(services, name, given_id)
        meta = services.store.topic(name)
        cfg = (services.topic_configs.log_config_for(meta) if meta is not None
               else services.topic_configs.default_log_config())
        code = services.replicas.apply_partition_state(
            name, topic_id, s.partition_index, s.leader, s.leader_epoch, list(s.isr), list(s.replicas),
            s.zk_version, cfg, s.controller_epoch)
        errors.append((name, topic_id, s.partition_index, code))
        if code == 0 and name == OFFSETS_TOPIC:
            if s.leader == services.broker_id:
                services.groups.on_become_leader(s.partition_index)
            else:
                services.groups.on_resign(s.partition_index)
        elif code == 0 and name == TXN_TOPIC:
            # The partition's leader epoch is the coordinator epoch of its transactions.
            if s.leader == services.broker_id:
                services.txn.state.on_become_leader(s.partition_index, s.leader_epoch)
            else:
                services.txn.state.on_resign(s.partition_index)
    return _leader_and_isr_response(v, 0, errors)


def _leader_and_isr_response(v: int, code: int, errors: list) -> dict:
    if v < 5:
        return {"error_code": code, "partition_errors": [
            {"topic_name": n, "partition_index": p, "error_code": e} for n, _, p, e in errors]}
    by_topic: dict = {}
    for n, tid, p, e in errors:
        by_topic.setdefault(tid, []).append({"partition_index": p, "error_code": e})
    return {"error_code": code, "topics": [{"topic_id": tid, "partition_errors": errs}
                                           for tid, errs in by_topic.items()]}


@handles("UpdateMetadata", (0, 8))
def update_metadata(services: ControllerRequestServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if not _from_a_broker(services, ctx):
        return {"error_code": Code.CLUSTER_AUTHORIZATION_FAILED}
    if _stale(services, request.controller_epoch):
        return {"error_code": Code.STALE_CONTROLLER_EPOCH}
    cache = services.metadata
    brokers = {}
    endpoints: dict[int, dict[str, tuple[str, int]]] = {}
    for b in request.live_brokers:
        if v == 0:
            host, port = b.v0_host, b.v0_port
        else:
            endpoints[b.id] = {e.listener.upper(): (e.host, e.port) for e in b.endpoints}
            ep = next((e for e in b.endpoints if e.listener.upper() == services.listener_name), None) \
                or (b.endpoints[0] if b.endpoints else None)
            if ep is None:
                continue
            host, port = ep.host, ep.port
        brokers[b.id] = BrokerInfo(b.id, host, port, b.rack)
    cache.brokers = brokers
    cache.endpoints = endpoints
    cache.set_controller(request.controller_id, request.controller_epoch)
    states = ([(t.topic_name, s) for t in request.topic_states for s in t.partition_states] if v >= 5
              else [(s.topic_name, s) for s in request.ungrouped_partition_states])
    for name, s in states:
        if s.leader == -2:      # Kafka's LeaderDuringDelete: the topic is being deleted
            cache.remove_topic(name)
            continue
        cache.set_partition(name, s.partition_index, PartitionInfo(
            s.leader, s.leader_epoch, list(s.replicas), list(s.isr),
            list(s.offline_replicas) if v >= 4 else []))
    services.purgatory.notify_all()
    return {"error_code": 0}


@handles("StopReplica", (0, 4))
def stop_replica(services: ControllerRequestServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if v >= 3:
        targets = [(t.topic_name, s.partition_index, s.delete_partition)
                   for t in request.topic_states for s in t.partition_states]
    elif v >= 1:
        targets = [(t.name, p, request.delete_partitions) for t in request.topics for p in t.partition_indexes]
    else:
        targets = [(t.topic_name, t.partition_index, request.delete_partitions)
                   for t in request.ungrouped_partitions]
    if not _from_a_broker(services, ctx):
        return {"error_code": Code.CLUSTER_AUTHORIZATION_FAILED, "partition_errors": [
            {"topic_name": name, "partition_index": index, "error_code": Code.CLUSTER_AUTHORIZATION_FAILED}
            for name, index, _ in targets]}
    if _stale(services, request.controller_epoch):
        return {"error_code": Code.STALE_CONTROLLER_EPOCH, "partition_errors": []}
    errors = []
    for name, index, delete in targets:
        services.replicas.stop_replica(name, index, delete)
        if name == OFFSETS_TOPIC:
            services.groups.on_resign(index)
        elif name == TXN_TOPIC:
            services.txn.state.on_resign(index)
        errors.append({"topic_name": name, "partition_index": index, "error_code": 0})
    return {"error_code": 0, "partition_errors": errors}


@handles("ControlledShutdown", (0, 3))
async def controlled_shutdown(services: ControllerRequestServices, request, ctx: RequestContext) -> dict:
    require_cluster(services, ctx, AclOperation.CLUSTER_ACTION)
    controller = services.controller
    remaining = await controller.controlled_shutdown(request.broker_id) if controller is not None else None
    if remaining is None:
        return {"error_code": Code.NOT_CONTROLLER, "remaining_partitions": []}
    return {"error_code": 0, "remaining_partitions": [{"topic_name": t, "partition_index": p}
                                                      for t, p in remaining]}
