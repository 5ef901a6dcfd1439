"""The broker's storage: segment -> partition log -> log manager (Kafka's layering).

- segment.py       one segment's files (.log, .index, .timeindex), FileRegion, delayed deletes
- index.py         the sparse offset index and time index
- partition_log.py a partition's log: append, read, truncate, retention
- log_loader.py    opening a partition dir: leftovers, recovery, producer state replay
- producer_state.py idempotent producer state (sequence / epoch checks), snapshots
- leader_epoch.py  the leader epoch cache (OffsetForLeaderEpoch)
- checkpoints.py   atomic text checkpoint files in Kafka's formats
- validation.py    header-only checks of incoming record sets
- config.py        LogConfig (topic-level settings)
- log_manager.py   all logs of the broker's log dirs

Everything runs on the event-loop thread; methods are synchronous and their blocking I/O
is documented per module. Record bytes are never decoded here (DESIGN invariant 6).
"""
from .config import LogConfig
from .log_manager import LogManager
from .partition_log import AppendInfo, FetchDataInfo, LogOffsetMetadata, PartitionLog
from .producer_state import ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION
from .segment import FileRegion, LogSegment

__all__ = [
    "AppendInfo", "FetchDataInfo", "FileRegion", "LogConfig", "LogManager", "LogOffsetMetadata",
    "LogSegment", "PartitionLog", "ORIGIN_CLIENT", "ORIGIN_COORDINATOR", "ORIGIN_REPLICATION",
]
