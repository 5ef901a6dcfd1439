"""The broker's storage: segment -> partition log -> log manager (Kafka's layering).

- segment.py       one segment's files (.log, .index, .timeindex), FileRegion, delayed deletes
- index.py         the sparse offset index and time index
- partition_log.py a partition's log: validation and offsets on append, reads up to the high
                   watermark, log start, producer state, leader epochs, retention decisions
- local_log.py     its segment list: log end, active segment, roll, lookups, flush, truncation,
                   removal and swaps of segments
- cleaner.py       log compaction of cleanup.policy=compact topics (LogManager.run_cleaner)
- log_loader.py    opening a partition dir: leftovers, recovery, producer state replay
- producer_state.py idempotent producer state (sequence / epoch checks), snapshots
- leader_epoch.py  the leader epoch cache (OffsetForLeaderEpoch)
- checkpoints.py   atomic text checkpoint files in Kafka's formats
- validation.py    header-only checks of incoming record sets
- config.py        LogConfig (topic-level settings)
- log_manager.py   all logs of the broker's log dirs: placement, a failed dir taken offline,
                   future logs of replicas moving between dirs
- dir_mover.py     copies a moving replica into its future log and swaps it in

Everything runs on the event-loop thread; methods are synchronous and their blocking I/O
is documented per module. Record bytes of delete-policy topics are never decoded on the
produce or fetch path; records are decoded only by the cleaner, by
ListOffsets-by-time lookups (record_lookup.py) and, as Kafka does, by the produce check
that a compacted topic's records have keys (validation.py).
"""
from .config import LogConfig
from .log_manager import LogManager
from .local_log import FetchDataInfo, LocalLog, LogOffsetMetadata
from .partition_log import AppendInfo, PartitionLog
from .producer_state import ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION
from .segment import FileRegion, LogSegment

__all__ = [
    "AppendInfo", "FetchDataInfo", "FileRegion", "LocalLog", "LogConfig", "LogManager",
    "LogOffsetMetadata",
    "LogSegment", "PartitionLog", "ORIGIN_CLIENT", "ORIGIN_COORDINATOR", "ORIGIN_REPLICATION",
]
