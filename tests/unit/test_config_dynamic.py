"""Dynamic broker configs in BrokerConfig: what AlterConfigs on a BROKER resource may set,
how the layers combine (this broker's > cluster-wide > file > default), and what
DescribeConfigs reports for them."""
from __future__ import annotations

import pytest

from broker.config import (DYNAMIC_APPLIED, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, BrokerConfig,
                           ConfigError)


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
    ({"num.io.threads": "4"}, False, "strom does not apply num.io.threads while running"),
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


def test_the_applied_keys_are_kafkas_dynamic_log_configs():
    assert DYNAMIC_APPLIED == KAFKA_DYNAMIC_LOG_CONFIGS


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
    changed = c.set_dynamic({"num.io.threads": "2", "log.retention.ms": "x",
                             "log.roll.ms": "60000"}, {})
    assert changed == {"log.roll.ms"} and c.log_roll_ms == 60000
    assert c.source("num.io.threads") != DYNAMIC_DEFAULT
    assert "ignored" in caplog.text
