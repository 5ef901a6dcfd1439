"""broker.config: .properties parsing, Kafka's defaults, typing/validation errors, listeners,
synonyms and DescribeConfigs-shaped answers. Sans-io except for small files in tmp_path."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from broker import config as C
from broker.config import (
    BROKER_CONFIG, BROKER_CONFIGS, LONG_MAX, TOPIC_CONFIG, TOPIC_CONFIGS, BrokerConfig,
    ConfigError, Listener, TopicConfigs, parse_properties,
)
from broker.config.value_types import java_double_string

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "server.properties") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def values(text: str) -> dict[str, str]:
    return {k: p.value for k, p in parse_properties(text).items()}


# ---- java.util.Properties -------------------------------------------------------------------

def test_properties_comments_separators_and_whitespace():
    text = ("# comment\n! also a comment\n\n   \n"
            "a=1\nb : 2\nc 3\n  d   =   4  \ne:5\nf\ng=\nh = x = y\n\t\fi\t=\t9\n")
    assert values(text) == {"a": "1", "b": "2", "c": "3", "d": "4  ", "e": "5", "f": "",
                            "g": "", "h": "x = y", "i": "9"}


def test_properties_line_numbers_duplicates_and_line_endings():
    props = parse_properties("a=1\r\n#x\r\nb=2\rc=3\na=4\n")
    assert props["a"] == C.Property("4", 5)  # the last duplicate wins, as in Java
    assert props["b"].line == 3 and props["c"].line == 4


def test_properties_continuation_lines():
    text = "list=a,\\\n     b,\\\n\tc\nnext=1\n# comment ends with \\\nnot.continued=2\n"
    props = parse_properties(text)
    assert props["list"] == C.Property("a,b,c", 1)
    assert props["next"].line == 4
    assert props["not.continued"].value == "2"


def test_properties_even_backslashes_do_not_continue():
    assert values("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}


def test_properties_escapes():
    text = "tab=a\\tb\nnl=a\\nb\nbs=a\\\\b\nuni=\\u00e9t\\u00C9\nk\\=ey\\ x=1\nother=\\q\\#\n"
    assert values(text) == {"tab": "a\tb", "nl": "a\nb", "bs": "a\\b", "uni": "étÉ",
                            "k=ey x": "1", "other": "q#"}


def test_properties_malformed_unicode_escape_names_line():
    with pytest.raises(ConfigError, match=r"f\.properties:2: malformed \\uxxxx"):
        parse_properties("a=1\nb=\\u12g4\n", "f.properties")


def test_read_properties_latin1_fallback(tmp_path):
    p = tmp_path / "x.properties"
    p.write_bytes(b"name=caf\xe9\n")
    assert C.read_properties(p)["name"].value == "café"


# ---- defaults -------------------------------------------------------------------------------

KAFKA_DEFAULTS = {
    "broker.id": -1, "listeners": "PLAINTEXT://:9092", "advertised.listeners": None,
    "log.dir": ["/tmp/kafka-logs"], "log.dirs": None, "num.partitions": 1,
    "default.replication.factor": 1, "auto.create.topics.enable": True,
    "delete.topic.enable": True, "log.segment.bytes": 1073741824, "log.roll.ms": None,
    "log.roll.hours": 168, "log.retention.ms": None, "log.retention.minutes": None,
    "log.retention.hours": 168, "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000, "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None, "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": 60000, "log.index.interval.bytes": 4096,
    "log.index.size.max.bytes": 10485760, "log.segment.delete.delay.ms": 60000,
    "log.cleanup.policy": ["delete"], "log.message.timestamp.type": "CreateTime",
    "message.max.bytes": 1048588, "socket.request.max.bytes": 104857600,
    "socket.send.buffer.bytes": 102400, "socket.receive.buffer.bytes": 102400,
    "num.network.threads": 3, "num.io.threads": 8, "zookeeper.connect": None,
    "zookeeper.session.timeout.ms": 18000, "zookeeper.connection.timeout.ms": None,
    "broker.rack": None, "min.insync.replicas": 1, "unclean.leader.election.enable": False,
    "replica.lag.time.max.ms": 30000, "replica.fetch.max.bytes": 1048576,
    "replica.fetch.wait.max.ms": 500, "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 3, "offsets.retention.minutes": 10080,
    "group.initial.rebalance.delay.ms": 3000, "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000, "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2, "transactional.id.expiration.ms": 604800000,
    "producer.id.expiration.ms": 86400000, "log.cleaner.enable": True,
    "log.cleaner.delete.retention.ms": 86400000, "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.min.compaction.lag.ms": 0, "strom.metrics.port": -1,
    "sasl.enabled.mechanisms": ["GSSAPI"], "compression.type": "producer",
    "controlled.shutdown.enable": True,
    "listener.security.protocol.map":
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
}


def test_defaults_are_kafkas():
    cfg = BrokerConfig.from_dict({})
    got = {k: cfg.get(k) for k in KAFKA_DEFAULTS}
    assert got == KAFKA_DEFAULTS
    assert all(cfg.source(k) == "DEFAULT_CONFIG" for k in BROKER_CONFIG)


def test_effective_derived_values_from_defaults():
    cfg = BrokerConfig.from_dict({})
    assert cfg.broker_id == 0 and cfg.standalone
    assert cfg.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.log_retention_ms == 168 * 3600000
    assert cfg.log_roll_ms == 168 * 3600000
    assert cfg.log_roll_jitter_ms == 0
    assert cfg.log_flush_interval_ms == LONG_MAX
    assert cfg.zookeeper_connection_timeout_ms == 18000
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.metrics_port == -1


def test_attribute_access_for_any_key():
    cfg = BrokerConfig.from_dict({"num.partitions": "7"})
    assert cfg.num_partitions == 7
    assert cfg.log_cleaner_min_cleanable_ratio == 0.5
    assert cfg.strom_metrics_port == -1
    with pytest.raises(AttributeError):
        cfg.no_such_key  # noqa: B018


def test_values_holds_every_key_and_lists_are_copies():
    cfg = BrokerConfig.from_dict({})
    vals = cfg.values()
    assert set(vals) == set(BROKER_CONFIG)
    cfg.get("log.dir").append("/x")
    assert BROKER_CONFIG["log.dir"].default == ["/tmp/kafka-logs"]


# ---- loading files, sources, overrides ---------------------------------------------------------

def test_load_types_and_sources(tmp_path):
    p = write(tmp_path, "broker.id=2\nnum.partitions = 4\nauto.create.topics.enable=FALSE\n"
                        "log.cleanup.policy=compact, delete\nlog.cleaner.min.cleanable.ratio=0.25\n"
                        "zookeeper.connect=127.0.0.1:2181/strom\n")
    cfg = BrokerConfig.load(p)
    assert cfg.path == p
    assert cfg.broker_id == 2 and not cfg.standalone
    assert cfg.get("num.partitions") == 4
    assert cfg.get("auto.create.topics.enable") is False
    assert cfg.get("log.cleanup.policy") == ["compact", "delete"]
    assert cfg.get("log.cleaner.min.cleanable.ratio") == 0.25
    assert cfg.zookeeper_connect == "127.0.0.1:2181/strom"
    assert cfg.source("num.partitions") == "STATIC_BROKER_CONFIG"
    assert cfg.source("num.io.threads") == "DEFAULT_CONFIG"
    assert cfg.where("num.partitions") == f"{p}:2"
    assert cfg.where("num.io.threads") is None


def test_overrides_win_and_are_static(tmp_path):
    p = write(tmp_path, "num.partitions=4\n")
    cfg = BrokerConfig.load(p, {"num.partitions": "9", "log.retention.hours": "1"})
    assert cfg.get("num.partitions") == 9
    assert cfg.source("log.retention.hours") == "STATIC_BROKER_CONFIG"
    assert cfg.where("num.partitions") == "--override"


def test_bad_override_is_named():
    with pytest.raises(ConfigError, match=r"--override: num.partitions: 'x' is not an integer"):
        BrokerConfig({}, overrides={"num.partitions": "x"})


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.load(tmp_path / "nope.properties")


def test_unknown_key_warns_naming_key_and_file(tmp_path, caplog):
    p = write(tmp_path, "num.partitions=2\nno.such.key=1\n")
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        cfg = BrokerConfig.load(p)
    assert cfg.unknown == {"no.such.key": "1"}
    msgs = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no.such.key" in m and str(p) in m for m in msgs)


def test_ignored_thread_keys_are_accepted_with_a_note(tmp_path, caplog):
    p = write(tmp_path, "num.io.threads=16\n")
    with caplog.at_level(logging.INFO, logger="broker.config"):
        cfg = BrokerConfig.load(p)
    assert cfg.get("num.io.threads") == 16
    assert any("num.io.threads" in r.getMessage() and "ignored" in r.getMessage()
               for r in caplog.records)


def test_unknown_broker_key_lookup_is_a_key_error():
    cfg = BrokerConfig.from_dict({})
    with pytest.raises(KeyError):
        cfg.get("nope")
    with pytest.raises(KeyError):
        cfg.source("nope")


# ---- bad values -------------------------------------------------------------------------------

@pytest.mark.parametrize("line, message", [
    ("num.partitions=abc", "num.partitions: 'abc' is not an integer"),
    ("num.partitions=1_0", "num.partitions: '1_0' is not an integer"),
    ("num.partitions=0", "num.partitions: 0 is out of range: must be at least 1"),
    ("num.partitions=3000000000", "num.partitions: 3000000000 is out of range for a int"),
    ("log.retention.bytes=99999999999999999999", "out of range for a long"),
    ("offsets.topic.replication.factor=40000", "out of range for a short"),
    ("delete.topic.enable=yes", "delete.topic.enable: 'yes' is not a boolean"),
    ("log.cleaner.min.cleanable.ratio=lots", "'lots' is not a number"),
    ("log.cleaner.min.cleanable.ratio=1.5", "must be between 0 and 1"),
    ("log.message.timestamp.type=createtime", "'createtime' is not one of CreateTime, LogAppendTime"),
    ("compression.type=brotli", "'brotli' is not one of uncompressed, zstd, lz4"),
    ("log.cleanup.policy=delete,shred", "'shred' is not one of compact, delete"),
    ("listeners=PLAINTEXT:9092", "listeners: 'PLAINTEXT:9092' is not a valid listener"),
    ("listeners=PLAINTEXT://host:99999", "port 99999 is out of range"),
    ("listener.security.protocol.map=PLAINTEXT", "is not a listener mapping"),
    ("listener.security.protocol.map=PLAINTEXT:TLS", "'TLS' is not one of PLAINTEXT"),
    ("strom.metrics.port=70000", "strom.metrics.port: 70000 is out of range"),
    ("ssl.client.auth=maybe", "'maybe' is not one of required"),
])
def test_bad_value_names_file_line_and_key(tmp_path, line, message):
    p = write(tmp_path, f"# header\nbroker.id=0\n{line}\n")
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(p)
    assert str(e.value).startswith(f"{p}:3: {line.split('=')[0]}: ")
    assert message in str(e.value)
    assert e.value.key == line.split("=")[0]


def test_exact_error_format(tmp_path):
    p = write(tmp_path, "\n" * 11 + "num.partitions=abc\n")
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(p)
    assert str(e.value) == f"{p}:12: num.partitions: 'abc' is not an integer"


def test_every_bad_line_is_reported(tmp_path):
    p = write(tmp_path, "num.partitions=x\nbroker.id=y\n")
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(p)
    lines = str(e.value).splitlines()
    assert lines == [f"{p}:1: num.partitions: 'x' is not an integer",
                     f"{p}:2: broker.id: 'y' is not an integer"]
    assert e.value.key == "num.partitions"


# ---- listeners --------------------------------------------------------------------------------

def test_listeners_bind_and_advertise_defaults():
    cfg = BrokerConfig.from_dict({"listeners": "PLAINTEXT://:9092,internal://[::1]:9093",
                                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert cfg.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9092), Listener("INTERNAL", "::1", 9093)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092),
                                        Listener("INTERNAL", "::1", 9093)]
    assert str(cfg.advertised_listeners[1]) == "INTERNAL://[::1]:9093"
    assert cfg.listeners[0].address == "0.0.0.0:9092"
    assert cfg.security_protocol("internal") == "PLAINTEXT"
    name, host, port = cfg.listeners[0]
    assert (name, host, port) == ("PLAINTEXT", "0.0.0.0", 9092)


def test_explicit_advertised_listeners():
    cfg = BrokerConfig.from_dict({"listeners": "PLAINTEXT://0.0.0.0:9092",
                                  "advertised.listeners": "PLAINTEXT://broker1.example:19092"})
    assert cfg.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "broker1.example", 19092)]


def test_advertising_0000_is_refused(tmp_path):
    p = write(tmp_path, "listeners=PLAINTEXT://0.0.0.0:9092\n")
    with pytest.raises(ConfigError, match=r":1: listeners: cannot advertise the non-routable "
                                          r"address 0\.0\.0\.0.*advertised\.listeners"):
        BrokerConfig.load(p)
    p = write(tmp_path, "advertised.listeners=PLAINTEXT://0.0.0.0:9092\n")
    with pytest.raises(ConfigError, match="advertised.listeners: cannot advertise"):
        BrokerConfig.load(p)


def test_listener_consistency_checks():
    with pytest.raises(ConfigError, match="no security protocol defined for listener CLIENT"):
        BrokerConfig.from_dict({"listeners": "CLIENT://:9092"})
    with pytest.raises(ConfigError, match="different name"):
        BrokerConfig.from_dict({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"})
    with pytest.raises(ConfigError, match="different port"):
        BrokerConfig.from_dict({"listeners": "PLAINTEXT://:9092,SSL://:9092"})
    with pytest.raises(ConfigError, match="not in listeners"):
        BrokerConfig.from_dict({"advertised.listeners": "SSL://h:9093"})
    with pytest.raises(ConfigError, match="at least one listener"):
        BrokerConfig.from_dict({"listeners": ""})


def test_port_zero_is_allowed_for_several_listeners():
    cfg = BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"})
    assert [lst.port for lst in cfg.listeners] == [0, 0]


def test_inter_broker_listener():
    props = {"listeners": "CLIENT://:9092,REPL://:9093",
             "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPL:PLAINTEXT",
             "inter.broker.listener.name": "repl"}
    assert BrokerConfig.from_dict(props).inter_broker_listener_name == "REPL"
    del props["inter.broker.listener.name"]
    with pytest.raises(ConfigError, match="inter-broker listener PLAINTEXT"):
        BrokerConfig.from_dict(props)
    with pytest.raises(ConfigError, match="only one of"):
        BrokerConfig.from_dict({"inter.broker.listener.name": "PLAINTEXT",
                                "security.inter.broker.protocol": "PLAINTEXT"})


# ---- log dirs, broker id, time synonyms -------------------------------------------------------

def test_relative_log_dirs_resolve_against_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = BrokerConfig.from_dict({"log.dirs": "./data/a, data/b,/abs/c"})
    assert cfg.log_dirs == [str(tmp_path / "data/a"), str(tmp_path / "data/b"), "/abs/c"]
    assert cfg.get("log.dirs") == ["./data/a", "data/b", "/abs/c"]


def test_log_dir_is_the_fallback_of_log_dirs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert BrokerConfig.from_dict({"log.dir": "x"}).log_dirs == [str(tmp_path / "x")]
    assert BrokerConfig.from_dict({"log.dir": "x", "log.dirs": "y"}).log_dirs == [str(tmp_path / "y")]
    with pytest.raises(ConfigError, match="log.dirs: duplicate"):
        BrokerConfig.from_dict({"log.dirs": "a,a"})
    with pytest.raises(ConfigError, match="at least one log directory"):
        BrokerConfig.from_dict({"log.dirs": " "})


def test_broker_id_rules():
    assert BrokerConfig.from_dict({}).broker_id == 0
    assert BrokerConfig.from_dict({"zookeeper.connect": "127.0.0.1:2181"}).broker_id == -1
    assert BrokerConfig.from_dict({"broker.id": "5", "zookeeper.connect": "z:1"}).broker_id == 5
    with pytest.raises(ConfigError, match="broker.id: -2 must be at least -1"):
        BrokerConfig.from_dict({"broker.id": "-2"})
    with pytest.raises(ConfigError, match="reserved.broker.max.id"):
        BrokerConfig.from_dict({"broker.id": "1001"})
    assert BrokerConfig.from_dict({"broker.id": "1001", "broker.id.generation.enable": "false"}
                                  ).broker_id == 1001


@pytest.mark.parametrize("props, expected", [
    ({}, 604800000),
    ({"log.retention.hours": "1"}, 3600000),
    ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120000),
    ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.hours": "-5"}, -1),
])
def test_retention_precedence_ms_minutes_hours(props, expected):
    cfg = BrokerConfig.from_dict(props)
    assert cfg.log_retention_ms == expected
    assert cfg.topic_defaults()["retention.ms"] == str(expected)


def test_roll_flush_and_zookeeper_timeout_synonyms():
    cfg = BrokerConfig.from_dict({"log.roll.hours": "2", "log.roll.jitter.hours": "1",
                                  "log.flush.scheduler.interval.ms": "3000",
                                  "zookeeper.session.timeout.ms": "6000"})
    assert cfg.log_roll_ms == 7200000 and cfg.log_roll_jitter_ms == 3600000
    assert cfg.log_flush_interval_ms == 3000
    assert cfg.zookeeper_connection_timeout_ms == 6000
    cfg = BrokerConfig.from_dict({"log.roll.hours": "2", "log.roll.ms": "10",
                                  "log.flush.interval.ms": "7",
                                  "zookeeper.connection.timeout.ms": "100"})
    assert cfg.log_roll_ms == 10 and cfg.log_flush_interval_ms == 7
    assert cfg.zookeeper_connection_timeout_ms == 100
    d = cfg.topic_defaults()
    assert d["segment.ms"] == "10" and d["flush.ms"] == "7"


def test_cross_key_checks():
    with pytest.raises(ConfigError, match="replica.fetch.wait.max.ms"):
        BrokerConfig.from_dict({"replica.fetch.wait.max.ms": "40000"})
    with pytest.raises(ConfigError, match="group.min.session.timeout.ms"):
        BrokerConfig.from_dict({"group.min.session.timeout.ms": "9999999"})


# ---- topic defaults and topic validation ----------------------------------------------------

def test_topic_defaults_from_kafka_defaults():
    d = BrokerConfig.from_dict({}).topic_defaults()
    assert set(d) == set(TOPIC_CONFIG)
    assert d == {
        "cleanup.policy": "delete", "compression.type": "producer",
        "delete.retention.ms": "86400000", "file.delete.delay.ms": "60000",
        "flush.messages": str(LONG_MAX), "flush.ms": str(LONG_MAX),
        "follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
        "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2",
        "local.retention.ms": "-2", "max.compaction.lag.ms": str(LONG_MAX),
        "max.message.bytes": "1048588", "message.downconversion.enable": "true",
        "message.timestamp.after.max.ms": str(LONG_MAX),
        "message.timestamp.before.max.ms": str(LONG_MAX),
        "message.timestamp.difference.max.ms": str(LONG_MAX),
        "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5",
        "min.compaction.lag.ms": "0", "min.insync.replicas": "1", "preallocate": "false",
        "remote.storage.enable": "false", "retention.bytes": "-1", "retention.ms": "604800000",
        "segment.bytes": "1073741824", "segment.index.bytes": "10485760",
        "segment.jitter.ms": "0", "segment.ms": "604800000",
        "unclean.leader.election.enable": "false",
    }


def test_topic_defaults_follow_the_broker():
    cfg = BrokerConfig.from_dict({
        "message.max.bytes": "2000000", "log.cleanup.policy": "compact,delete",
        "compression.type": "zstd", "log.segment.bytes": "1048576", "min.insync.replicas": "2",
        "log.cleaner.min.cleanable.ratio": "0.1", "unclean.leader.election.enable": "true",
        "log.segment.delete.delay.ms": "5", "log.cleaner.delete.retention.ms": "6"})
    d = cfg.topic_defaults()
    assert d["max.message.bytes"] == "2000000"
    assert d["cleanup.policy"] == "compact,delete"
    assert d["compression.type"] == "zstd"
    assert d["segment.bytes"] == "1048576"
    assert d["min.insync.replicas"] == "2"
    assert d["min.cleanable.dirty.ratio"] == "0.1"
    assert d["unclean.leader.election.enable"] == "true"
    assert d["file.delete.delay.ms"] == "5" and d["delete.retention.ms"] == "6"


def test_topic_config_typed_with_overrides():
    cfg = BrokerConfig.from_dict({"log.retention.hours": "1"})
    t = cfg.topic_config({"cleanup.policy": "compact", "segment.bytes": "2000000"})
    assert t["cleanup.policy"] == ["compact"]
    assert t["segment.bytes"] == 2000000
    assert t["retention.ms"] == 3600000
    assert t["preallocate"] is False


def test_topic_validate_accepts_and_trims():
    assert TopicConfigs.validate({"retention.ms": " 1000 ", "cleanup.policy": "compact"}) == \
        {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert TopicConfigs.validate({}) == {}
    assert "retention.ms" in TopicConfigs.names()


@pytest.mark.parametrize("configs, key, message", [
    ({"retention.ms": "1", "no.such.config": "1"}, "no.such.config",
     "Unknown topic config name: no.such.config"),
    ({"retention.ms": None}, "retention.ms", "Null value not supported for topic configs: retention.ms"),
    ({"retention.ms": "abc"}, "retention.ms",
     "Invalid value abc for configuration retention.ms: 'abc' is not an integer"),
    ({"retention.ms": "-2"}, "retention.ms", "must be at least -1"),
    ({"cleanup.policy": "shred"}, "cleanup.policy", "not one of compact, delete"),
    ({"message.timestamp.type": "Now"}, "message.timestamp.type", "not one of CreateTime"),
    ({"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio", "between 0 and 1"),
    ({"preallocate": "1"}, "preallocate", "not a boolean"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms",
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"leader.replication.throttled.replicas": "0:1,x"}, "leader.replication.throttled.replicas",
     "PARTITION:BROKER"),
])
def test_topic_validate_errors(configs, key, message):
    with pytest.raises(ConfigError) as e:
        TopicConfigs.validate(configs)
    assert e.value.key == key
    assert message in str(e.value)
    assert e.value.code == 40 and e.value.name == "INVALID_CONFIG"


def test_throttled_replicas_forms():
    TopicConfigs.validate({"leader.replication.throttled.replicas": "*",
                           "follower.replication.throttled.replicas": "0:1, 1:2"})


# ---- DescribeConfigs --------------------------------------------------------------------------

def test_describe_broker_entry():
    cfg = BrokerConfig.from_dict({"num.partitions": "3", "log.retention.hours": "24"})
    e = cfg.describe("num.partitions")
    assert (e.value, e.source, e.read_only, e.type) == ("3", "STATIC_BROKER_CONFIG", True, "INT")
    assert [(s.name, s.value, s.source) for s in e.synonyms] == [
        ("num.partitions", "3", "STATIC_BROKER_CONFIG"), ("num.partitions", "1", "DEFAULT_CONFIG")]
    assert e.source_id == 4 and e.type_id == 3
    e = cfg.describe("log.retention.hours")
    assert e.source == "STATIC_BROKER_CONFIG" and e.value == "24"
    e = cfg.describe("log.retention.ms")  # null and nothing of its own: Kafka drops the others
    assert (e.value, e.source, e.synonyms, e.read_only) == (None, "DEFAULT_CONFIG", (), False)
    assert cfg.describe("message.max.bytes").read_only is False
    assert cfg.describe("listeners").read_only is False


def test_describe_sensitive_values_are_hidden():
    cfg = BrokerConfig.from_dict({"ssl.keystore.password": "secret"})
    e = cfg.describe("ssl.keystore.password")
    assert e.is_sensitive and e.value is None and e.type == "PASSWORD"
    assert e.source == "STATIC_BROKER_CONFIG"
    assert all(s.value is None for s in e.synonyms)


def test_describe_topic_entries():
    cfg = BrokerConfig.from_dict({"log.segment.bytes": "2097152", "log.retention.ms": "1000"})
    e = cfg.describe_topic("segment.bytes")
    assert e.value == "2097152" and e.source == "STATIC_BROKER_CONFIG" and not e.read_only
    assert [(s.name, s.source) for s in e.synonyms] == [
        ("log.segment.bytes", "STATIC_BROKER_CONFIG"), ("log.segment.bytes", "DEFAULT_CONFIG")]
    e = cfg.describe_topic("segment.bytes", {"segment.bytes": "3000000"})
    assert e.value == "3000000" and e.source == "TOPIC_CONFIG"
    assert e.synonyms[0] == C.ConfigSynonym("segment.bytes", "3000000", "TOPIC_CONFIG")
    e = cfg.describe_topic("retention.ms")
    assert e.value == "1000" and e.source == "STATIC_BROKER_CONFIG"
    e = BrokerConfig.from_dict({}).describe_topic("retention.ms")
    assert e.value == "604800000" and e.source == "DEFAULT_CONFIG" and e.synonyms == ()
    e = cfg.describe_topic("remote.storage.enable")  # no broker synonym
    assert e.value == "false" and e.source == "DEFAULT_CONFIG" and e.type == "BOOLEAN"
    assert len(cfg.describe_topic_all()) == len(TOPIC_CONFIGS)
    assert len(cfg.describe_all()) == len(BROKER_CONFIGS)


# ---- the tables themselves ------------------------------------------------------------------

def test_tables_are_consistent():
    for k in BROKER_CONFIGS + TOPIC_CONFIGS:
        assert k.type in {"int", "short", "long", "bool", "string", "list", "double", "password",
                          "class"}, k.name
        assert k.importance in {"high", "medium", "low"}, k.name
        assert k.update_mode in {"read-only", "per-broker", "cluster-wide"}, k.name
        assert k.doc, k.name
        assert k.kafka_type in C.CONFIG_TYPE_IDS
        if k.default is not None and k.validator is not None:
            assert k.validator(k.default) is None, k.name
        if k.default is not None:  # the default survives a round trip through its string form
            assert k.parse(k.default_string() or "") == k.default, k.name
    assert len(BROKER_CONFIG) == len(BROKER_CONFIGS) and len(TOPIC_CONFIG) == len(TOPIC_CONFIGS)
    for t in TOPIC_CONFIGS:
        for s in t.synonyms:
            assert s in BROKER_CONFIG, (t.name, s)
        if t.synonyms:  # Kafka's defaults agree: the broker's default gives the topic's default
            assert BrokerConfig.from_dict({}).topic_defaults()[t.name] == t.default_string(), t.name


def test_kafka_string_forms():
    assert C.to_config_string("bool", True) == "true"
    assert C.to_config_string("list", ["a", "b"]) == "a,b"
    assert C.to_config_string("long", None) is None
    assert java_double_string(0.5) == "0.5"
    assert java_double_string(1.0) == "1.0"
    assert java_double_string(1.7976931348623157e308) == "1.7976931348623157E308"
    assert java_double_string(1e7) == "1.0E7"
    assert java_double_string(0.0001) == "1.0E-4"
    assert str(C.Range(1)) == "[1,...]" and str(C.Range(0, 1)) == "[0,...,1]"


# ---- shipped files and the CLI ------------------------------------------------------------------

def test_shipped_standalone_config(monkeypatch):
    monkeypatch.chdir(REPO)
    cfg = BrokerConfig.load("config/server.properties")
    assert cfg.broker_id == 0 and cfg.standalone
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.log_dirs == [str(REPO / "data/kafka-logs")]
    assert cfg.get("num.partitions") == 1
    assert cfg.get("offsets.topic.replication.factor") == 1
    assert cfg.unknown == {}


@pytest.mark.parametrize("i", [0, 1, 2])
def test_shipped_cluster_configs(monkeypatch, i):
    monkeypatch.chdir(REPO)
    cfg = BrokerConfig.load(f"config/server-{i}.properties")
    assert cfg.broker_id == i and not cfg.standalone
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092 + i)]
    assert cfg.zookeeper_connect == "127.0.0.1:2181/strom"
    assert cfg.log_dirs == [str(REPO / f"data/kafka-logs-{i}")]
    assert cfg.unknown == {}


def test_shipped_zookeeper_properties():
    props = C.read_properties(REPO / "config/zookeeper.properties")
    assert {k: p.value for k, p in props.items()}.items() >= {
        "dataDir": "./data/zookeeper", "clientPort": "2181", "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false", "4lw.commands.whitelist": "*"}.items()


def test_cli_prints_effective_config(tmp_path, capsys):
    p = write(tmp_path, "num.partitions=3\nssl.key.password=hunter2\n")
    assert C.main([str(p), "--override", "broker.id=4"]) == 0
    out = capsys.readouterr().out
    assert "broker id 4" in out
    assert any(line.split()[:2] == ["num.partitions", "3"] and f"{p}:1" in line
               for line in out.splitlines())
    assert "hunter2" not in out and "[hidden]" in out
    assert "retention.ms" in out  # topic defaults section


def test_cli_fails_naming_the_problem(tmp_path, capsys):
    p = write(tmp_path, "num.partitions=abc\n")
    assert C.main([str(p)]) == 1
    assert f"{p}:1: num.partitions: 'abc' is not an integer" in capsys.readouterr().err
    assert C.main([str(p), "--override", "nonsense"]) == 2


def test_cli_module_entry_point(tmp_path):
    import subprocess
    import sys
    p = write(tmp_path, "num.partitions=abc\n")
    r = subprocess.run([sys.executable, "-m", "broker.config", str(p)], cwd=REPO,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 1
    assert "num.partitions: 'abc' is not an integer" in r.stderr
