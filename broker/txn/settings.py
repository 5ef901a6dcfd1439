"""The broker configs of the transaction coordinator and its state topic."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig


@dataclass(frozen=True)
class TxnSettings:
    num_partitions: int             # transaction.state.log.num.partitions
    replication_factor: int         # transaction.state.log.replication.factor
    min_isr: int                    # transaction.state.log.min.isr
    segment_bytes: int              # transaction.state.log.segment.bytes
    max_timeout_ms: int             # transaction.max.timeout.ms
    id_expiration_ms: int           # transactional.id.expiration.ms
    abort_interval_ms: int          # transaction.abort.timed.out.transaction.cleanup.interval.ms
    write_timeout_ms: int           # request.timeout.ms: a state write waits this long for the ISR

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> TxnSettings:
        return cls(cfg.get("transaction.state.log.num.partitions"),
                   cfg.get("transaction.state.log.replication.factor"),
                   cfg.get("transaction.state.log.min.isr"),
                   cfg.get("transaction.state.log.segment.bytes"),
                   cfg.get("transaction.max.timeout.ms"),
                   cfg.get("transactional.id.expiration.ms"),
                   cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                   cfg.get("request.timeout.ms"))
