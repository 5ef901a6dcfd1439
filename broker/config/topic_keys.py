"""The topic config keys: Kafka's LogConfig with its names, types, defaults and ranges, and for
each the broker keys that supply its default ("synonyms", in Kafka's order of precedence),
which is what DescribeConfigs reports. A declaration table: one entry per key."""
from __future__ import annotations

import re

from .keys import READ_ONLY, ConfigKey
from .validators import (CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES, CustomCheck, Range,
                         Validator)
from .value_types import LONG_MAX, ConfigValue


def _t(name: str, type_: str, default: ConfigValue, synonyms: tuple[str, ...], doc: str,
       validator: Validator | None = None, note: str = "") -> ConfigKey:
    return ConfigKey(name, type_, default, doc, "medium", validator, READ_ONLY, synonyms, note)


def _check_throttled(v: list[str]) -> str | None:
    if v == ["*"]:
        return None
    for item in v:
        if not re.fullmatch(r"[0-9]+:[0-9]+", item):
            return f"{item!r} is not PARTITION:BROKER (or the list is not a single '*')"
    return None


_THROTTLED = CustomCheck(_check_throttled, "[PARTITION:BROKER,...] or *")

TOPIC_CONFIGS: tuple[ConfigKey, ...] = (
    _t("cleanup.policy", "list", ["delete"], ("log.cleanup.policy",),
       "delete, compact, or both.", CLEANUP_POLICIES),
    _t("compression.type", "string", "producer", ("compression.type",),
       "Final compression of the topic's batches; 'producer' keeps the producer's codec.",
       COMPRESSION_TYPES),
    _t("delete.retention.ms", "long", 86400000, ("log.cleaner.delete.retention.ms",),
       "How long tombstones stay in a compacted topic.", Range(0)),
    _t("file.delete.delay.ms", "long", 60000, ("log.segment.delete.delay.ms",),
       "Wait before a deleted segment's files are removed.", Range(0)),
    _t("flush.messages", "long", LONG_MAX, ("log.flush.interval.messages",),
       "Messages appended before an fsync.", Range(1)),
    _t("flush.ms", "long", LONG_MAX, ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
       "Max time data stays unflushed.", Range(0)),
    _t("follower.replication.throttled.replicas", "list", [], (),
       "Replicas throttled on the follower side.", _THROTTLED),
    _t("index.interval.bytes", "int", 4096, ("log.index.interval.bytes",),
       "Bytes of log between two offset index entries.", Range(0)),
    _t("leader.replication.throttled.replicas", "list", [], (),
       "Replicas throttled on the leader side.", _THROTTLED),
    _t("local.retention.bytes", "long", -2, ("log.local.retention.bytes",),
       "Local retention bytes with tiered storage; -2: retention.bytes.", Range(-2)),
    _t("local.retention.ms", "long", -2, ("log.local.retention.ms",),
       "Local retention with tiered storage; -2: retention.ms.", Range(-2)),
    _t("max.compaction.lag.ms", "long", LONG_MAX, ("log.cleaner.max.compaction.lag.ms",),
       "Max time a message stays ineligible for compaction.", Range(1)),
    _t("max.message.bytes", "int", 1048588, ("message.max.bytes",),
       "Largest record batch the topic accepts (after compression).", Range(0)),
    _t("message.downconversion.enable", "bool", True, ("log.message.downconversion.enable",),
       "Allow down-conversion for old fetch versions.", None,
       "strom stores RecordBatch v2 only and never down-converts"),
    _t("message.timestamp.after.max.ms", "long", LONG_MAX,
       ("log.message.timestamp.after.max.ms",),
       "Max lead of a CreateTime timestamp over the broker's clock.", Range(0)),
    _t("message.timestamp.before.max.ms", "long", LONG_MAX,
       ("log.message.timestamp.before.max.ms",),
       "Max age of a CreateTime timestamp relative to the broker's clock.", Range(0)),
    _t("message.timestamp.difference.max.ms", "long", LONG_MAX,
       ("log.message.timestamp.difference.max.ms",),
       "Max difference between a CreateTime timestamp and the broker's clock (deprecated).",
       Range(0)),
    _t("message.timestamp.type", "string", "CreateTime", ("log.message.timestamp.type",),
       "CreateTime or LogAppendTime.", TIMESTAMP_TYPES),
    _t("min.cleanable.dirty.ratio", "double", 0.5, ("log.cleaner.min.cleanable.ratio",),
       "Min dirty/total ratio for the log to be cleaned.", Range(0, 1)),
    _t("min.compaction.lag.ms", "long", 0, ("log.cleaner.min.compaction.lag.ms",),
       "Min age of a message before it may be compacted.", Range(0)),
    _t("min.insync.replicas", "int", 1, ("min.insync.replicas",),
       "With acks=all, replicas that must be in sync for a write to succeed.", Range(1)),
    _t("preallocate", "bool", False, ("log.preallocate",), "Preallocate new segment files."),
    _t("remote.storage.enable", "bool", False, (), "Tiered storage for the topic.", None,
       "tiered storage is not implemented by strom"),
    _t("retention.bytes", "long", -1, ("log.retention.bytes",),
       "Max size of a partition's log before old segments are deleted; -1: no limit."),
    _t("retention.ms", "long", 604800000,
       ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
       "Time to keep a segment; -1: no limit.", Range(-1)),
    _t("segment.bytes", "int", 1073741824, ("log.segment.bytes",),
       "Max size of one segment file.", Range(14)),
    _t("segment.index.bytes", "int", 10485760, ("log.index.size.max.bytes",),
       "Max size of an offset index file.", Range(4)),
    _t("segment.jitter.ms", "long", 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"),
       "Max jitter subtracted from segment.ms.", Range(0)),
    _t("segment.ms", "long", 604800000, ("log.roll.ms", "log.roll.hours"),
       "Max age of the active segment before a roll.", Range(1)),
    _t("unclean.leader.election.enable", "bool", False, ("unclean.leader.election.enable",),
       "Allow an out-of-sync replica to become leader (data loss)."),
)

TOPIC_CONFIG: dict[str, ConfigKey] = {k.name: k for k in TOPIC_CONFIGS}
