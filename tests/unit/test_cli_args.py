"""strom's command-line tools without a broker: argument rules, parsing helpers and the
exact output formats (Kafka's), plus the one-line error contract of `run_tool`."""
from __future__ import annotations

import datetime as dt
import io
import socket
import time

import pytest

from clients.cli import common, configs, console_consumer, console_producer, consumer_groups
from clients.cli import get_offsets, topics
from clients.cli.common import CliError
from clients.protocol.errors import BY_NAME
from clients.types import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition


def tp(t: str, p: int) -> TopicPartition:
    return TopicPartition(t, p)


# ====================================================================== common

def test_parser_error_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        topics.build_parser().parse_args(["--bootstrap-server", "h:1", "--list", "--bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --bogus" in err


def test_missing_required_flags_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        console_producer.build_parser().parse_args(["--bootstrap-server", "h:1"])
    assert e.value.code == 2
    assert "--topic" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        topics.build_parser().parse_args(["--bootstrap-server", "h:1"])  # no action
    with pytest.raises(SystemExit):
        topics.build_parser().parse_args(["--bootstrap-server", "h:1", "--list", "--delete"])


def test_parse_assignment_and_config_list():
    assert common.parse_assignment("a.b=x=y") == ("a.b", "x=y")
    assert common.parse_assignment("k=") == ("k", "")
    with pytest.raises(CliError, match="expected key=value"):
        common.parse_assignment("novalue")
    assert common.parse_config_list("a=1,b=[x,y,z],c=3") == {"a": "1", "b": "x,y,z", "c": "3"}
    assert common.parse_config_list("") == {}
    with pytest.raises(CliError):
        common.parse_config_list("a=1,oops")


def test_command_timeout_flag_env_default(monkeypatch):
    ns = topics.build_parser().parse_args(["--bootstrap-server", "h:1", "--list"])
    monkeypatch.delenv(common.TIMEOUT_ENV, raising=False)
    assert common.command_timeout(ns) == common.DEFAULT_TIMEOUT
    monkeypatch.setenv(common.TIMEOUT_ENV, "2.5")
    assert common.command_timeout(ns) == 2.5
    ns.command_timeout = 0.75
    assert common.command_timeout(ns) == 0.75
    ns.command_timeout = 0
    with pytest.raises(CliError):
        common.command_timeout(ns)


def test_client_config_precedence_and_timeouts(tmp_path):
    f = tmp_path / "c.properties"
    f.write_text("client.id = from-file\nbootstrap.servers=ignored:1\nacks=1\n")
    ns = console_producer.build_parser().parse_args(
        ["--bootstrap-server", "h:9", "--topic", "t", "--producer.config", str(f),
         "--command-timeout", "3", "--producer-property", "acks=0"])
    cfg = common.client_config(ns, "producer", console_producer.producer_overrides(ns))
    assert cfg["bootstrap.servers"] == "h:9"            # the flag wins over the file
    assert cfg["client.id"] == "from-file"
    assert cfg["acks"] == "0"                           # --producer-property over the file
    assert cfg["socket.connection.setup.timeout.ms"] == 3000
    assert "default.api.timeout.ms" not in cfg          # not a producer key
    ns = topics.build_parser().parse_args(["--bootstrap-server", "h:9", "--list",
                                           "--command-timeout", "60"])
    cfg = common.client_config(ns, "admin")
    assert cfg["default.api.timeout.ms"] == 60000 and cfg["request.timeout.ms"] == 30000


def test_missing_config_file_is_cli_error(tmp_path):
    with pytest.raises(CliError, match="cannot read config file"):
        common.read_config_file(str(tmp_path / "nope.properties"))


def test_run_tool_maps_errors_to_one_line(capsys, monkeypatch):
    monkeypatch.delenv("STROM_CLI_DEBUG", raising=False)

    def fail(exc):
        def body():
            raise exc
        return body

    assert common.run_tool(fail(CliError("bad thing", 3)), "P: ") == 3
    assert capsys.readouterr().err == "P: bad thing\n"
    unknown = BY_NAME["UNKNOWN_TOPIC_OR_PARTITION"]("topic x")
    assert common.run_tool(fail(unknown)) == 1
    assert capsys.readouterr().err == "Error: topic x (UNKNOWN_TOPIC_OR_PARTITION)\n"
    assert common.run_tool(fail(TimeoutError("no answer\nat all"))) == 1
    assert capsys.readouterr().err == "Error: timed out: no answer at all\n"
    assert common.run_tool(fail(ZeroDivisionError("boom"))) == 1
    err = capsys.readouterr().err
    assert err == "Error: unexpected ZeroDivisionError: boom\n" and "Traceback" not in err
    assert common.run_tool(lambda: None) == 0


def test_wait_reachable_refused_port_fails_at_once_in_kafkas_words():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # bound, not listening: connections are refused
        start = time.monotonic()
        with pytest.raises(CliError, match=rf"^Connection to node -1 \(127.0.0.1/127.0.0.1:{port}\) "
                                           r"could not be established. Broker may not be available.$"):
            common.wait_reachable(f"127.0.0.1:{port}", 10.0)
        assert time.monotonic() - start < 1.0
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        common.wait_reachable(f"127.0.0.1:{srv.getsockname()[1]}", 1.0)   # returns


# ====================================================================== kafka-topics

def _topics_args(*argv):
    return topics.build_parser().parse_args(["--bootstrap-server", "h:1", *argv])


@pytest.mark.parametrize("argv, message", [
    (["--create"], "--topic is required"),
    (["--delete"], "--topic is required"),
    (["--alter", "--topic", "t"], "--alter needs --partitions"),
    (["--list", "--partitions", "3"], "--partitions can only be used"),
    (["--describe", "--config", "a=b"], "--config can only be used with --create"),
    (["--create", "--topic", "t", "--partitions", "0"], "partitions must be greater than 0"),
    (["--create", "--topic", "t", "--replica-assignment", "0:1", "--partitions", "2"],
     "--replica-assignment can't be used"),
])
def test_topics_flag_rules(argv, message):
    with pytest.raises(CliError, match=message):
        topics.check_args(_topics_args(*argv))


def test_topics_regex_matching():
    names = ["t1", "t2", "test.topic", "testXtopic", "other"]
    assert topics.matching(names, "t.") == ["t1", "t2"]
    assert topics.matching(names, "test\\.topic") == ["test.topic"]
    assert topics.matching(names, "t") == []            # whole-name match
    assert topics.matching(names, "[bad") == []         # an invalid regex is a plain name
    assert topics.matching(names, None) == sorted(names)


def test_topics_describe_format():
    from clients.admin import PartitionDescription, TopicDescription

    desc = TopicDescription("t", False, [PartitionDescription(1, -1, [1, 0], [0], []),
                                         PartitionDescription(0, 0, [0, 1], [0, 1], [])])
    lines = topics.describe_lines(desc, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert lines == [
        "Topic: t\tTopicId: \tPartitionCount: 2\tReplicationFactor: 2\t"
        "Configs: retention.ms=1000,cleanup.policy=compact",
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0,1\tIsr: 0,1",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 1,0\tIsr: 0"]
    assert topics.describe_lines(desc, {}, under_replicated=True) == [lines[2]]
    assert topics.describe_lines(desc, {}, unavailable=True) == [lines[2]]
    assert topics.describe_lines(desc, {}, overrides_only=True) == []


def test_topic_id_and_configs_formatting():
    import uuid
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert topics.format_topic_id(u) == "EjRWeBI0VngSNFZ4EjRWeA"
    assert topics.format_topic_id(None) == ""
    from clients.admin import ConfigEntry
    entries = {"b": ConfigEntry("b", "2", "DYNAMIC_TOPIC_CONFIG", False, False, False),
               "a": ConfigEntry("a", "1", "DEFAULT_CONFIG", True, False, False),
               "s": ConfigEntry("s", None, "DYNAMIC_TOPIC_CONFIG", False, False, True)}
    assert topics.non_default_configs(entries) == {"b": "2", "s": "null"}


def test_replica_assignment():
    assert topics.parse_replica_assignment("0:1,1:2,2") == {0: [0, 1], 1: [1, 2], 2: [2]}
    with pytest.raises(CliError, match="duplicate"):
        topics.parse_replica_assignment("0:0")
    with pytest.raises(CliError):
        topics.parse_replica_assignment("a:b")


# ====================================================================== kafka-configs

def _configs_args(*argv):
    return configs.build_parser().parse_args(["--bootstrap-server", "h:1", *argv])


def test_configs_entity_resolution():
    assert configs.resolve_entity(_configs_args("--describe", "--topic", "t")) == ("topic", "t")
    assert configs.resolve_entity(_configs_args("--describe", "--entity-type", "topics")) == ("topic", None)
    assert configs.resolve_entity(_configs_args("--describe", "--entity-type", "brokers",
                                                "--entity-name", "0")) == ("broker", "0")
    assert configs.resolve_entity(_configs_args("--describe", "--entity-type", "brokers",
                                                "--entity-default")) == ("broker", "")
    assert configs.resolve_entity(_configs_args("--describe", "--broker", "1")) == ("broker", "1")
    for argv, msg in [(("--describe",), "is required"),
                      (("--describe", "--topic", "t", "--broker", "0"), "only one entity"),
                      (("--describe", "--entity-name", "t"), "--entity-type must be specified"),
                      (("--describe", "--broker", "x"), "valid integer broker id")]:
        with pytest.raises(CliError, match=msg):
            configs.resolve_entity(_configs_args(*argv))


def test_configs_describe_format():
    from clients.admin import ConfigEntry
    entries = {"retention.ms": ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", False, False, False),
               "segment.ms": ConfigEntry("segment.ms", "604800000", "DEFAULT_CONFIG", True, False, False),
               "secret": ConfigEntry("secret", None, "DYNAMIC_TOPIC_CONFIG", False, False, True)}
    assert configs.describe_lines(entries, "topic", "t", False) == [
        "Dynamic configs for topic t are:",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
        "  secret=null sensitive=true synonyms={DYNAMIC_TOPIC_CONFIG:secret=null}"]
    assert configs.describe_lines(entries, "topic", "t", True)[0] == "All configs for topic t are:"
    assert len(configs.describe_lines(entries, "topic", "t", True)) == 4
    assert configs.describe_lines(entries, "broker", "0", False) == ["Dynamic configs for broker 0 are:"]
    assert configs.describe_lines({}, "broker", "", False) == [
        "Default configs for brokers in the cluster are:"]


def test_configs_alter_request(tmp_path):
    f = tmp_path / "add.properties"
    f.write_text("x=1\n")
    args = _configs_args("--alter", "--topic", "t", "--add-config", "a=1,b=[p,q]",
                         "--add-config-file", str(f), "--delete-config", "c, d")
    assert configs.alter_request(args) == ({"x": "1", "a": "1", "b": "p,q"}, ["c", "d"])
    with pytest.raises(CliError, match="needs --add-config"):
        configs.alter_request(_configs_args("--alter", "--topic", "t"))
    with pytest.raises(CliError, match="both added and deleted"):
        configs.alter_request(_configs_args("--alter", "--topic", "t", "--add-config", "a=1",
                                            "--delete-config", "a"))


# ====================================================================== kafka-get-offsets

def test_get_offsets_time_and_partitions():
    assert [get_offsets.parse_time(t) for t in ("-1", "latest", "-2", "EARLIEST", "-3",
                                                "max-timestamp", "1700000000000")] == \
        [-1, -1, -2, -2, -3, -3, 1700000000000]
    with pytest.raises(CliError, match="Malformed time argument"):
        get_offsets.parse_time("yesterday")
    with pytest.raises(CliError):
        get_offsets.parse_time("-5")
    assert get_offsets.parse_partitions("0,2-4") == {0, 2, 3, 4}
    assert get_offsets.parse_partitions(None) is None
    with pytest.raises(CliError):
        get_offsets.parse_partitions("x")
    assert get_offsets.list_offsets_spec(-1) == "latest"
    assert get_offsets.list_offsets_spec(-2) == "earliest"
    assert get_offsets.list_offsets_spec(-3) == -3
    assert get_offsets.list_offsets_spec(123) == 123


def test_get_offsets_format():
    tps = [tp("b", 0), tp("a", 10), tp("a", 2), tp("c", 0)]
    results = {tp("b", 0): OffsetAndTimestamp(5, -1), tp("a", 10): OffsetAndTimestamp(7, 1),
               tp("a", 2): OffsetAndTimestamp(-1, -1)}
    assert get_offsets.format_offsets(tps, results) == ["a:2:", "a:10:7", "b:0:5", "c:0:"]


# ====================================================================== kafka-consumer-groups

def _groups_args(*argv):
    return consumer_groups.build_parser().parse_args(["--bootstrap-server", "h:1", *argv])


@pytest.mark.parametrize("argv, message", [
    (["--describe"], "--group or --all-groups is required"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "reset scopes"),
    (["--reset-offsets", "--group", "g", "--all-topics"], "reset specifications"),
    (["--reset-offsets", "--group", "g", "--group", "h", "--all-topics", "--to-latest"], "one --group"),
    (["--describe", "--group", "g", "--execute"], "--execute can only be used"),
    (["--list", "--to-offset", "3"], "only be used with --reset-offsets"),
    (["--describe", "--group", "g", "--members", "--state"], "can't be used together"),
    (["--delete", "--group", "g", "--all-groups"], "can't be used together"),
])
def test_consumer_groups_flag_rules(argv, message):
    with pytest.raises(CliError, match=message):
        consumer_groups.check_args(_groups_args(*argv))


def test_consumer_groups_exclusive_specs_are_argparse_errors():
    with pytest.raises(SystemExit):
        _groups_args("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest")
    with pytest.raises(SystemExit):
        _groups_args("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest",
                     "--dry-run", "--execute")


def test_reset_spec_and_scope():
    assert consumer_groups.reset_spec(_groups_args("--reset-offsets", "--to-offset", "0")) == ("to_offset", 0)
    assert consumer_groups.reset_spec(_groups_args("--reset-offsets", "--shift-by", "-2")) == ("shift_by", -2)
    assert consumer_groups.reset_spec(_groups_args("--reset-offsets")) is None
    assert consumer_groups.parse_topic_scope("t") == ("t", None)
    assert consumer_groups.parse_topic_scope("t:2,0") == ("t", [0, 2])
    with pytest.raises(CliError):
        consumer_groups.parse_topic_scope("t:x")


def test_datetime_and_duration_parsing():
    assert consumer_groups.parse_datetime_ms("2023-11-14T22:13:20.000Z") == 1700000000000
    assert consumer_groups.parse_datetime_ms("2023-11-14T23:13:20.500+01:00") == 1700000000500
    local = dt.datetime(2023, 11, 14, 22, 13, 20).astimezone()
    assert consumer_groups.parse_datetime_ms("2023-11-14T22:13:20.000") == int(local.timestamp() * 1000)
    with pytest.raises(CliError):
        consumer_groups.parse_datetime_ms("2023-11-14")
    with pytest.raises(CliError):
        consumer_groups.parse_datetime_ms("yesterdayTnoon")
    assert consumer_groups.parse_duration_ms("PT5M") == 300000
    assert consumer_groups.parse_duration_ms("P1DT2H0.5S") == (26 * 3600 + 0.5) * 1000
    for bad in ("5M", "P", "PT", "P1DT"):
        with pytest.raises(CliError):
            consumer_groups.parse_duration_ms(bad)


def test_plan_reset_every_spec():
    a0, a1 = tp("a", 0), tp("a", 1)
    tps = [a0, a1]
    committed = {a0: 5}
    earliest, latest = {a0: 2, a1: 0}, {a0: 10, a1: 4}
    plan = consumer_groups.plan_reset
    assert plan(("to_earliest", True), tps, committed, earliest, latest) == {a0: 2, a1: 0}
    assert plan(("to_latest", True), tps, committed, earliest, latest) == {a0: 10, a1: 4}
    assert plan(("to_current", True), tps, committed, earliest, latest) == {a0: 5, a1: 4}
    assert plan(("to_offset", 3), tps, committed, earliest, latest) == {a0: 3, a1: 3}
    assert plan(("to_offset", 50), tps, committed, earliest, latest) == {a0: 10, a1: 4}   # clamped
    assert plan(("to_offset", 0), [a0], committed, earliest, latest) == {a0: 2}
    assert plan(("shift_by", -4), [a0], committed, earliest, latest) == {a0: 2}           # clamped
    assert plan(("shift_by", 3), [a0], committed, earliest, latest) == {a0: 8}
    with pytest.raises(CliError, match="no current committed offset"):
        plan(("shift_by", 1), tps, committed, earliest, latest)
    assert plan(("to_datetime", "x"), tps, committed, earliest, latest, {a0: 7, a1: None}) == {a0: 7, a1: 4}


def test_format_table_like_kafka():
    lines = consumer_groups.format_table(consumer_groups.RESET_HEADER,
                                         [("g", "t", 0, 5), ("g", "t", 1, 12)],
                                         consumer_groups.RESET_WIDTHS)
    assert lines == ["",
                     f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} NEW-OFFSET",
                     f"{'g':<30} {'t':<30} {'0':<10} 5",
                     f"{'g':<30} {'t':<30} {'1':<10} 12"]
    wide = consumer_groups.format_table(("A", "B"), [("x" * 20, "y")], (15, 0))
    assert wide[2] == "x" * 20 + " y"


def test_offset_rows_lag_and_members():
    from clients.admin import MemberDescription
    m1 = MemberDescription("c-1", None, "cli", "/127.0.0.1", [tp("t", 0)])
    m2 = MemberDescription("c-2", None, "cli", "/127.0.0.1", [])
    committed = {tp("t", 0): OffsetAndMetadata(3), tp("t", 1): OffsetAndMetadata(7)}
    log_end = {tp("t", 0): 10, tp("t", 1): 7, tp("u", 0): 4}
    rows = consumer_groups.offset_rows("g", [m1, m2], committed, log_end)
    assert [tuple(r) for r in rows] == [
        ("g", "-", "-", "-", "-", "-", "c-2", "/127.0.0.1", "cli"),
        ("g", "t", 0, 3, 10, 7, "c-1", "/127.0.0.1", "cli"),
        ("g", "t", 1, 7, 7, 0, "-", "-", "-")]
    m3 = MemberDescription("c-3", None, "cli", "/h", [tp("u", 0)])
    rows = consumer_groups.offset_rows("g", [m3], {}, log_end)
    assert tuple(rows[0]) == ("g", "u", 0, "-", 4, "-", "c-3", "/h", "cli")
    assert consumer_groups.member_rows("g", [m1], True) == [["g", "c-1", "/127.0.0.1", "cli", 1, "t(0)"]]


def test_state_messages():
    assert consumer_groups.state_message("g", "Empty") == "\nConsumer group 'g' has no active members."
    assert "rebalancing" in consumer_groups.state_message("g", "PreparingRebalance")
    assert consumer_groups.state_message("g", "Stable") is None


# ====================================================================== console producer

def test_producer_flags_to_config():
    ns = console_producer.build_parser().parse_args(
        ["--bootstrap-server", "h:1", "--topic", "t", "--compression-codec",
         "--request-required-acks", "1", "--timeout", "7", "--producer-property", "linger.ms=99",
         "--producer-property", "client.id=me"])
    cfg = console_producer.producer_overrides(ns)
    assert cfg["compression.type"] == "gzip"      # the bare flag means gzip
    assert cfg["acks"] == "1" and cfg["linger.ms"] == 7 and cfg["client.id"] == "me"
    ns = console_producer.build_parser().parse_args(
        ["--bootstrap-server", "h:1", "--topic", "t", "--compression-codec", "zstd"])
    assert console_producer.producer_overrides(ns) == {"compression.type": "zstd"}
    assert common.client_config(ns, "producer", {}, {"client.id": "cp"})["client.id"] == "cp"
    with pytest.raises(SystemExit):
        console_producer.build_parser().parse_args(
            ["--bootstrap-server", "h:1", "--topic", "t", "--compression-codec", "brotli"])


def test_line_parsing():
    plain = console_producer.reader_options([])
    assert console_producer.parse_line(b"a\tb", 1, plain) == (None, b"a\tb", [])
    keyed = console_producer.reader_options(["parse.key=true", "key.separator=:"])
    assert console_producer.parse_line(b"k:v:w", 1, keyed) == (b"k", b"v:w", [])
    assert console_producer.parse_line(b":v", 1, keyed) == (b"", b"v", [])
    with pytest.raises(CliError, match="No key separator found on line number 3: 'nokey'"):
        console_producer.parse_line(b"nokey", 3, keyed)
    lenient = console_producer.reader_options(["parse.key=true", "ignore.error=true"])
    assert console_producer.parse_line(b"nokey", 1, lenient) == (None, b"nokey", [])
    full = console_producer.reader_options(["parse.key=true", "parse.headers=true",
                                            "null.marker=NULL"])
    assert console_producer.parse_line(b"h1:v1,h2:NULL\tNULL\tval", 1, full) == \
        (None, b"val", [("h1", b"v1"), ("h2", None)])
    assert console_producer.parse_line(b"\tk\tNULL", 1, full) == (b"k", None, [])
    with pytest.raises(CliError, match="No header key separator"):
        console_producer.parse_line(b"h1\tk\tv", 1, full)
    with pytest.raises(CliError, match="must not be empty"):
        console_producer.reader_options(["key.separator="])


def test_read_lines_strips_line_endings():
    data = io.BytesIO(b"a\r\nb\n\nc")
    assert list(console_producer.read_lines(data)) == [b"a", b"b", b"", b"c"]


# ====================================================================== console consumer

def rec(**kw):
    base = dict(topic="t", partition=2, offset=5, timestamp=1700000000000, timestamp_type=0,
                key=b"k", value=b"v", headers=[])
    base.update(kw)
    return ConsumerRecord(**base)


def test_default_format_is_value_only():
    opts = console_consumer.format_options([])
    assert console_consumer.format_record(rec(), opts) == b"v\n"
    assert console_consumer.format_record(rec(value=None), opts) == b"null\n"


def test_format_every_field_in_kafkas_order():
    opts = console_consumer.format_options(
        ["print.key=true", "print.partition=true", "print.offset=true", "print.timestamp=true",
         "print.headers=true"])
    line = console_consumer.format_record(rec(headers=[("h1", b"v1"), ("h2", None)]), opts)
    assert line == b"CreateTime:1700000000000\tPartition:2\tOffset:5\th1:v1,h2:null\tk\tv\n"
    line = console_consumer.format_record(rec(key=None, headers=[], timestamp_type=1), opts)
    assert line == b"LogAppendTime:1700000000000\tPartition:2\tOffset:5\tNO_HEADERS\tnull\tv\n"
    line = console_consumer.format_record(rec(timestamp=-1, timestamp_type=-1), opts)
    assert line.startswith(b"NO_TIMESTAMP\t")


def test_format_separators_and_deserializers():
    opts = console_consumer.format_options(
        ["print.key=true", "key.separator=:", "line.separator=\\r\\n", "print.value=false",
         "key.deserializer=org.apache.kafka.common.serialization.IntegerDeserializer"])
    assert console_consumer.format_record(rec(key=(258).to_bytes(4, "big")), opts) == b"258\r\n"
    with pytest.raises(CliError, match="unsupported deserializer"):
        console_consumer.format_options(["value.deserializer=com.acme.Magic"])


def test_consumer_flag_rules_and_config():
    p = console_consumer.build_parser()
    def args(*argv):
        return p.parse_args(["--bootstrap-server", "h:1", *argv])
    for argv, msg in [((), "Exactly one of --include/--topic"),
                      (("--topic", "t", "--include", "x"), "Exactly one"),
                      (("--include", "x", "--partition", "0"), "topic is required"),
                      (("--topic", "t", "--offset", "3"), "partition is required"),
                      (("--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"),
                       "cannot be specified together")]:
        with pytest.raises(CliError, match=msg):
            console_consumer.check_args(args(*argv))
    assert console_consumer.parse_offset("earliest") == "earliest"
    assert console_consumer.parse_offset("12") == 12
    with pytest.raises(CliError):
        console_consumer.parse_offset("-4")
    cfg = console_consumer.consumer_overrides(args("--topic", "t", "--group", "g", "--from-beginning",
                                                   "--isolation-level", "read_committed"))
    assert cfg == {"group.id": "g", "auto.offset.reset": "earliest",
                   "isolation.level": "read_committed"}
    with pytest.raises(CliError, match="do not match"):
        console_consumer.consumer_overrides(args("--topic", "t", "--group", "g",
                                                 "--consumer-property", "group.id=h"))
    cfg = console_consumer._final_config(args("--topic", "t"))
    assert cfg["group.id"].startswith("console-consumer-") and cfg["enable.auto.commit"] == "false"


class FakeConsumer:
    """Hands out scripted poll() answers; records what it was asked."""

    def __init__(self, batches):
        self.batches = list(batches)
        self.asked = []

    def poll(self, timeout=1.0, max_records=None):
        self.asked.append(max_records)
        if self.batches:
            batch = self.batches.pop(0)
            return batch[:max_records] if max_records else batch
        time.sleep(min(timeout, 0.01))
        return []


def test_consume_stops_at_max_messages_without_overreading():
    out = io.BytesIO()
    fake = FakeConsumer([[rec(offset=i, value=b"%d" % i) for i in range(3)],
                         [rec(offset=i, value=b"%d" % i) for i in range(3, 9)]])
    n = console_consumer.consume(fake, console_consumer.format_options([]), out, 5, None, False)
    assert n == 5 and out.getvalue() == b"0\n1\n2\n3\n4\n"
    assert fake.asked == [5, 2]


def test_consume_idle_timeout():
    out = io.BytesIO()
    fake = FakeConsumer([[rec()]])
    start = time.monotonic()
    n = console_consumer.consume(fake, console_consumer.format_options([]), out, None, 200, False)
    assert n == 1 and 0.15 < time.monotonic() - start < 2.0
