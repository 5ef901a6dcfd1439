"""What /readyz answers: is this broker serving and caught up?

Ready means, in order of what a starting broker reaches:
  1. its Kafka listeners are bound;
  2. (cluster) its ZooKeeper session is connected and not closing;
  3. (cluster) the controller has sent it metadata (UpdateMetadata) naming it among the
     live brokers, so it is registered and clients are sent to it;
  4. every partition it follows has it in the ISR (the ISR as the controller last told
     it): it holds what its leaders hold, so stopping another broker next (a rolling
     restart) leaves every partition with as many in-sync replicas as before.

Under-replicated partitions this broker *leads* and its offline log dirs are reported in the
answer but do not make it unready: the first mean another broker is behind or dead, and taking
the leaders that still serve those partitions out of service would make it worse; with a dir
offline the broker serves its other dirs (Kafka's log-dir failure handling) and the
controller has moved the failed dir's leaders away.

Runs on the broker's loop (reads live replica state): O(partitions).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .collectors import MetricSources

SHOWN = 5          # partitions named in a reason; the count says how many there are


@dataclass
class ReadinessReport:
    broker_id: int
    reasons: list[str] = field(default_factory=list)   # empty: ready
    under_replicated_led: int = 0
    offline_log_dirs: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "broker_id": self.broker_id, "reasons": self.reasons,
                "under_replicated_led": self.under_replicated_led,
                "offline_log_dirs": self.offline_log_dirs}


def readiness(sources: MetricSources) -> ReadinessReport:
    """The broker's readiness now, with every reason it is not ready."""
    report = ReadinessReport(sources.broker_id, offline_log_dirs=sorted(sources.log_manager.offline_dirs))
    reasons = report.reasons
    if not sources.servers:
        reasons.append("no Kafka listener is bound yet")
    zk = sources.zk_session
    if zk is not None:
        if zk.closing:
            reasons.append("shutting down")
        elif zk.state != "CONNECTED":
            reasons.append(f"ZooKeeper session is {zk.state}")
    meta = sources.metadata
    if sources.cluster_mode and meta is not None:
        if meta.controller_id < 0:
            reasons.append("no metadata from the controller yet")
        elif sources.broker_id not in meta.brokers:
            reasons.append("the controller does not list this broker as live "
                           "(not registered in ZooKeeper yet)")
    behind: list[str] = []
    max_lag = 0
    for (topic, index), p in sorted(sources.replicas.partitions.items()):
        if p.is_leader:
            if len(p.isr) < len(p.replicas):
                report.under_replicated_led += 1
            continue
        info = meta.partition(topic, index) if meta is not None else None
        isr = info.isr if info is not None else p.isr
        if sources.broker_id not in isr:
            behind.append(f"{topic}-{index}")
            max_lag = max(max_lag, p.fetch_lag)
    if behind:
        names = ", ".join(behind[:SHOWN]) + (", ..." if len(behind) > SHOWN else "")
        reasons.append(f"catching up: {len(behind)} followed partition(s) outside the ISR "
                       f"({names}; largest fetch lag {max_lag} messages)")
    return report
