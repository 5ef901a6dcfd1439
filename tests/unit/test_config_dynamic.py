"""Dynamic broker configs in BrokerConfig: what AlterConfigs on a BROKER resource may set,
how the layers combine (this broker's > cluster-wide > file > default), and what
DescribeConfigs reports for them."""
from __future__ import annotations

import pytest

from broker.config import (DYNAMIC_APPLIED, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, BrokerConfig,
                           ConfigError)
from broker.config.dynamic import RUNTIME_KEYS, TOPIC_DEFAULT_KEYS
from broker.config.throttles import ThrottledReplicas, throttled_replicas


def config(**static: str) -> BrokerConfig:
    return BrokerConfig.from_dict({"log.dirs": "/tmp/strom-unused", **{
        k.replace("_", "."): v for k, v in static.items()}})


def test_layers_combine_in_kafkas_order():
    c = config(log_retention_ms="5000", log_segment_bytes="4000000")
    assert c.source("log.retention.ms") == STATIC
    changed = c.set_dynamic({"log.retention.ms": "1000", "log.segment.bytes": "3000000"},
                            {"log.retention.ms": "2000"})
    assert changed == {"log.retention.ms", "log.segment.bytes"}
    assert c.get("log.retention.ms") == 2000 and c.log_retention_ms == 2000
    assert c.source("log.retention.ms") == DYNAMIC_BROKER
    assert c.get("log.segment.bytes") == 3000000
    assert c.source("log.segment.bytes") == DYNAMIC_DEFAULT
    assert c.topic_defaults()["retention.ms"] == "2000"          # what topics inherit
    assert c.topic_defaults()["segment.bytes"] == "3000000"
    entry = c.describe("log.retention.ms")
    assert [(s.source, s.value) for s in entry.synonyms] == [
        (DYNAMIC_BROKER, "2000"), (DYNAMIC_DEFAULT, "1000"), (STATIC, "5000"),
        ("DEFAULT_CONFIG", "168")]
    # The default entity describes its own values, without the per-broker layer.
    defaults = {e.name: e for e in c.describe_dynamic_defaults()}
    assert set(defaults) == {"log.retention.ms", "log.segment.bytes"}
    assert defaults["log.retention.ms"].value == "1000"
    assert defaults["log.retention.ms"].source == DYNAMIC_DEFAULT
    assert [(s.source, s.value) for s in defaults["log.retention.ms"].synonyms] == [
        (DYNAMIC_DEFAULT, "1000")]                               # that entity's only (Kafka)
    # Removing them brings the file's values back.
    assert c.set_dynamic({}, {}) == {"log.retention.ms", "log.segment.bytes"}
    assert c.get("log.retention.ms") == 5000 and c.source("log.retention.ms") == STATIC
    assert c.set_dynamic({}, {}) == set()


@pytest.mark.parametrize("configs, per_broker, message", [
    ({"no.such.key": "1"}, True, "Unknown broker config"),
    ({"broker.id": "4"}, True, "Cannot update these configs dynamically: Set(broker.id)"),
    ({"log.retention.hours": "1"}, False, "Cannot update these configs dynamically"),
    ({"advertised.listeners": "PLAINTEXT://h:1"}, False,
     "Cannot update these configs at default cluster level"),
    ({"max.connections": "4"}, False, "strom does not apply max.connections while running"),
    ({"ssl.keystore.location": "/k.pem"}, True, "These security configs can be dynamically "
     "updated only per-listener using the listener prefix: Set(ssl.keystore.location)"),
    ({"leader.replication.throttled.rate": "-1"}, False,
     "Invalid value -1 for configuration leader.replication.throttled.rate"),
    ({"log.segment.bytes": "ten"}, True, "Invalid value ten for configuration log.segment.bytes"),
    ({"min.insync.replicas": "0"}, False, "Invalid value 0 for configuration min.insync.replicas"),
])
def test_what_may_not_be_set(configs, per_broker, message):
    with pytest.raises(ConfigError) as e:
        config().check_dynamic(configs, per_broker)
    assert message in str(e.value)
    assert e.value.key == next(iter(configs))


# Kafka 3.x: DynamicLogConfig.ReconfigurableConfigs = the broker synonyms of topic configs
# (ServerTopicConfigSynonyms) minus log.message.format.version, which strom does not have.
KAFKA_DYNAMIC_LOG_CONFIGS = {
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
    "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.downconversion.enable",
    "log.local.retention.ms", "log.local.retention.bytes"}


def test_the_applied_keys_are_kafkas_dynamic_log_configs_and_runtime_keys():
    assert TOPIC_DEFAULT_KEYS == KAFKA_DYNAMIC_LOG_CONFIGS
    assert DYNAMIC_APPLIED == KAFKA_DYNAMIC_LOG_CONFIGS | RUNTIME_KEYS
    assert {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second"} <= RUNTIME_KEYS


def test_kafkas_dynamic_keys_are_accepted_and_read_only_ones_refused():
    c = config()
    c.check_dynamic({"leader.replication.throttled.rate": "1000000",
                     "follower.replication.throttled.rate": "1000000",
                     "num.io.threads": "4"}, per_broker=False)      # thread counts: ignored
    assert c.set_dynamic({"follower.replication.throttled.rate": "5"},
                         {"leader.replication.throttled.rate": "7"}) == {
        "follower.replication.throttled.rate", "leader.replication.throttled.rate"}
    assert c.get("leader.replication.throttled.rate") == 7
    assert c.source("follower.replication.throttled.rate") == DYNAMIC_DEFAULT
    entry = c.describe("leader.replication.throttled.rate")
    assert not entry.read_only and entry.type == "LONG"
    assert [(s.source, s.value) for s in entry.synonyms] == [
        (DYNAMIC_BROKER, "7"), ("DEFAULT_CONFIG", "9223372036854775807")]
    assert c.describe("broker.id").read_only and not c.describe("log.retention.ms").read_only


def test_throttled_replicas_parse_kafkas_lists():
    assert throttled_replicas({}) == (ThrottledReplicas(False, frozenset()),) * 2
    leader, follower = throttled_replicas({"leader.replication.throttled.replicas": "*",
                                           "follower.replication.throttled.replicas": "0:1, 2:3"})
    assert leader.covers(9, 9) and follower.covers(2, 3) and not follower.covers(0, 3)


def test_combinations_that_make_no_valid_topic_defaults_are_not_applied(caplog):
    """Each value may be fine on its own (an empty cleanup.policy list is, for the key's
    own validator) and still make no valid LogConfig: nothing is applied then."""
    from broker.log import LogConfig
    c = config()
    defaults = c.topic_defaults_with({"log.cleanup.policy": ""}, {})
    assert defaults["cleanup.policy"] == ""
    with pytest.raises(ValueError):
        LogConfig.from_topic_configs(defaults)
    before = c.topic_defaults()
    assert c.set_dynamic({"log.cleanup.policy": "", "log.retention.ms": "1000"}, {},
                         validate=LogConfig.from_topic_configs) == set()
    assert c.topic_defaults() == before and c.source("log.retention.ms") != DYNAMIC_DEFAULT
    assert "not applied" in caplog.text


def test_stored_entries_it_cannot_apply_are_skipped_not_fatal(caplog):
    c = config()
    changed = c.set_dynamic({"max.connections": "2", "log.retention.ms": "x",
                             "log.roll.ms": "60000"}, {})
    assert changed == {"log.roll.ms"} and c.log_roll_ms == 60000
    assert c.source("max.connections") != DYNAMIC_DEFAULT
    assert "ignored" in caplog.text
