"""Requests from the controller: LeaderAndIsr, UpdateMetadata, StopReplica.

Each carries the controller's epoch; a request from an older epoch than the newest this
broker has seen is refused with STALE_CONTROLLER_EPOCH, so a deposed controller cannot
change leadership (invariant 4).
"""
from __future__ import annotations

import uuid

from clients.protocol.errors import Code

from ...group.offsets import OFFSETS_TOPIC
from ...metadata_cache import PartitionInfo
from ..dispatch import handles
from zkcoord.store import BrokerInfo


def _stale(broker, controller_epoch: int) -> bool:
    if controller_epoch < broker.replicas.controller_epoch:
        return True
    broker.replicas.controller_epoch = controller_epoch
    return False


def _topic_id(broker, name: str, given) -> uuid.UUID:
    if given is not None and getattr(given, "int", 0):
        return given
    meta = broker.coordinator.topic(name)
    return meta.topic_id if meta else uuid.UUID(int=0)


@handles("LeaderAndIsr", (0, 7))
def leader_and_isr(broker, request, ctx) -> dict:
    v = ctx.version
    if v >= 2:
        states = [(t.topic_name, t.topic_id if v >= 5 else None, s)
                  for t in request.topic_states for s in t.partition_states]
    else:
        states = [(s.topic_name, None, s) for s in request.ungrouped_partition_states]
    if _stale(broker, request.controller_epoch):
        errors = [(name, tid, s.partition_index, Code.STALE_CONTROLLER_EPOCH) for name, tid, s in states]
        return _leader_and_isr_response(broker, v, Code.STALE_CONTROLLER_EPOCH, errors)
    errors = []
    for name, given_id, s in states:
        topic_id = _topic_id(broker, name, given_id)
        meta = broker.coordinator.topic(name)
        cfg = broker.log_config_for(meta) if meta is not None else broker.default_log_config()
        code = broker.replicas.apply_partition_state(
            name, topic_id, s.partition_index, s.leader, s.leader_epoch, list(s.isr), list(s.replicas),
            s.zk_version, cfg, s.controller_epoch)
        errors.append((name, topic_id, s.partition_index, code))
        if code == 0 and name == OFFSETS_TOPIC:
            if s.leader == broker.broker_id:
                broker.group_coordinator.on_become_leader(s.partition_index)
            else:
                broker.group_coordinator.on_resign(s.partition_index)
    return _leader_and_isr_response(broker, v, 0, errors)


def _leader_and_isr_response(broker, v: int, code: int, errors: list) -> dict:
    if v < 5:
        return {"error_code": code, "partition_errors": [
            {"topic_name": n, "partition_index": p, "error_code": e} for n, _, p, e in errors]}
    by_topic: dict = {}
    for n, tid, p, e in errors:
        by_topic.setdefault(tid, []).append({"partition_index": p, "error_code": e})
    return {"error_code": code, "topics": [{"topic_id": tid, "partition_errors": errs}
                                           for tid, errs in by_topic.items()]}


@handles("UpdateMetadata", (0, 8))
def update_metadata(broker, request, ctx) -> dict:
    v = ctx.version
    if _stale(broker, request.controller_epoch):
        return {"error_code": Code.STALE_CONTROLLER_EPOCH}
    cache = broker.metadata
    brokers = {}
    for b in request.live_brokers:
        if v == 0:
            host, port = b.v0_host, b.v0_port
        else:
            ep = next((e for e in b.endpoints if e.listener == broker.listener_name), None) \
                or (b.endpoints[0] if b.endpoints else None)
            if ep is None:
                continue
            host, port = ep.host, ep.port
        brokers[b.id] = BrokerInfo(b.id, host, port, b.rack)
    cache.brokers = brokers
    cache.controller_id = request.controller_id
    cache.controller_epoch = request.controller_epoch
    states = ([(t.topic_name, s) for t in request.topic_states for s in t.partition_states] if v >= 5
              else [(s.topic_name, s) for s in request.ungrouped_partition_states])
    for name, s in states:
        if s.leader == -2:      # Kafka's LeaderDuringDelete: the topic is being deleted
            cache.remove_topic(name)
            continue
        cache.set_partition(name, s.partition_index, PartitionInfo(
            s.leader, s.leader_epoch, list(s.replicas), list(s.isr),
            list(s.offline_replicas) if v >= 4 else []))
    broker.purgatory.notify_all()
    return {"error_code": 0}


@handles("StopReplica", (0, 4))
def stop_replica(broker, request, ctx) -> dict:
    v = ctx.version
    if v >= 3:
        targets = [(t.topic_name, s.partition_index, s.delete_partition)
                   for t in request.topic_states for s in t.partition_states]
    elif v >= 1:
        targets = [(t.name, p, request.delete_partitions) for t in request.topics for p in t.partition_indexes]
    else:
        targets = [(t.topic_name, t.partition_index, request.delete_partitions)
                   for t in request.ungrouped_partitions]
    if _stale(broker, request.controller_epoch):
        return {"error_code": Code.STALE_CONTROLLER_EPOCH, "partition_errors": []}
    errors = []
    for name, index, delete in targets:
        broker.replicas.stop_replica(name, index, delete)
        if name == OFFSETS_TOPIC:
            broker.group_coordinator.on_resign(index)
        errors.append({"topic_name": name, "partition_index": index, "error_code": 0})
    return {"error_code": 0, "partition_errors": errors}


@handles("ControlledShutdown", (0, 3))
async def controlled_shutdown(broker, request, ctx) -> dict:
    controller = broker.controller
    remaining = await controller.controlled_shutdown(request.broker_id) if controller is not None else None
    if remaining is None:
        return {"error_code": Code.NOT_CONTROLLER, "remaining_partitions": []}
    return {"error_code": 0, "remaining_partitions": [{"topic_name": t, "partition_index": p}
                                                      for t, p in remaining]}
