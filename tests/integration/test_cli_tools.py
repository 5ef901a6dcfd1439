"""strom's command-line tools (bin/kafka-*.sh) run as subprocesses against a real broker.

Setup and independent checks use confluent-kafka (librdkafka), so a tool is never verified
only by itself: records are produced with chosen partitions and timestamps, group commits are
made and read back by a librdkafka consumer that never joins the group. One broker serves
the whole module; each test uses topics and groups of its own."""
from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import REPO, BrokerProcess, free_port
from tests.support.groups_harness import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

QUIET = {"log_level": 0}
TOOLS = ("topics", "console-producer", "console-consumer", "consumer-groups", "get-offsets",
         "configs", "acls", "transactions")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cli") / "b0").start()
    yield b
    b.stop()


def tool(name: str, *args: str, stdin: bytes | None = None, timeout: float = 60,
         env: dict | None = None) -> subprocess.CompletedProcess:
    """Run bin/kafka-NAME.sh; stdout/stderr as text."""
    proc = subprocess.run([str(REPO / "bin" / f"kafka-{name}.sh"), *args], input=stdin,
                          capture_output=True, timeout=timeout, cwd=REPO,
                          env=dict(os.environ, **(env or {})))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(),
                                       proc.stderr.decode())


def ok(name: str, *args: str, **kw) -> str:
    r = tool(name, *args, **kw)
    assert r.returncode == 0, f"kafka-{name} {args} -> {r.returncode}: {r.stderr}"
    assert "Traceback" not in r.stderr
    return r.stdout


def fails(name: str, *args: str, rc: int = 1, **kw) -> str:
    """Run a tool that must fail with exit code `rc` and exactly one stderr line; return it."""
    r = tool(name, *args, **kw)
    assert r.returncode == rc, f"kafka-{name} {args} -> {r.returncode}: {r.stdout} {r.stderr}"
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def create_topic(broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    wait_until(lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == partitions,
               10, f"metadata of {name}")


def produce(broker, topic: str, records: list[tuple[int, bytes, int]]) -> None:
    """(partition, value, timestamp ms) records, all acknowledged."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, **QUIET})
    errors = []
    for part, value, ts in records:
        p.produce(topic, value=value, partition=part, timestamp=ts,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []


def commit(broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    try:
        c.commit(offsets=[CTP(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def committed(broker, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False, **QUIET})
    try:
        return [tp.offset for tp in c.committed([CTP(topic, p) for p in range(partitions)], timeout=10)]
    finally:
        c.close()


def table(stdout: str) -> list[list[str]]:
    """Whitespace-split rows of a Kafka-style table (header included, blank lines dropped)."""
    return [line.split() for line in stdout.splitlines() if line.strip()]


# ====================================================================== kafka-topics

def test_topics_create_list_describe_alter_delete(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    assert ok("topics", *bs, "--create", "--topic", "cli-t1", "--partitions", "3",
              "--replication-factor", "1", "--config", "retention.ms=123456",
              "--config", "cleanup.policy=delete") == "Created topic cli-t1.\n"
    line = fails("topics", *bs, "--create", "--topic", "cli-t1", "--partitions", "3")
    assert line == "Error while executing topic command : Topic 'cli-t1' already exists."
    assert ok("topics", *bs, "--create", "--topic", "cli-t1", "--if-not-exists") == ""
    assert "cli-t1" in ok("topics", *bs, "--list").split("\n")

    described = ok("topics", *bs, "--describe", "--topic", "cli-t1").splitlines()
    head = re.fullmatch(r"Topic: cli-t1\tTopicId: (\S*)\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: (.*)", described[0])
    assert head, described[0]
    assert set(head.group(2).split(",")) == {"retention.ms=123456", "cleanup.policy=delete"}
    assert described[1:] == [f"\tTopic: cli-t1\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0"
                             for p in range(3)]

    assert ok("topics", *bs, "--alter", "--topic", "cli-t1", "--partitions", "5") == ""
    assert "PartitionCount: 5" in ok("topics", *bs, "--describe", "--topic", "cli-t.")
    line = fails("topics", *bs, "--alter", "--topic", "cli-t1", "--partitions", "2")
    assert "INVALID_PARTITIONS" in line

    assert ok("topics", *bs, "--delete", "--topic", "cli-t1") == ""
    assert "cli-t1" not in ok("topics", *bs, "--list").split("\n")
    line = fails("topics", *bs, "--describe", "--topic", "cli-t1")
    assert line == "Error while executing topic command : Topic 'cli-t1' does not exist as expected"
    assert ok("topics", *bs, "--delete", "--topic", "cli-t1", "--if-exists") == ""


# ====================================================================== console producer/consumer

def test_console_producer_then_consumer_exact_output(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker, "cli-pc", 1)
    before = int(time.time() * 1000)
    lines = b"h1:v1,h2:x\tk1:one\nNO_H\tk2:two:with:colons\nh3:z\t:empty-key\n"
    ok("console-producer", *bs, "--topic", "cli-pc", "--property", "parse.key=true",
       "--property", "key.separator=:", "--property", "parse.headers=true",
       "--property", "null.marker=NO_H", stdin=lines)
    after = int(time.time() * 1000)

    r = tool("console-consumer", *bs, "--topic", "cli-pc", "--from-beginning", "--max-messages", "3",
             "--property", "print.key=true", "--property", "print.partition=true",
             "--property", "print.offset=true", "--property", "print.timestamp=true",
             "--property", "print.headers=true")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "Processed a total of 3 messages"
    out = r.stdout.splitlines()
    stamps = [int(re.match(r"CreateTime:(\d+)\t", line).group(1)) for line in out]
    assert all(before <= ts <= after for ts in stamps)
    assert [line.split("\t", 1)[1] for line in out] == [
        "Partition:0\tOffset:0\th1:v1,h2:x\tk1\tone",
        "Partition:0\tOffset:1\tNO_HEADERS\tk2\ttwo:with:colons",
        "Partition:0\tOffset:2\th3:z\t\tempty-key"]

    # compressed + synchronous sends, then a partition/offset read with a custom separator
    ok("console-producer", *bs, "--topic", "cli-pc", "--compression-codec", "lz4", "--sync",
       "--request-required-acks", "1", stdin=b"four\nfive\r\n")
    r = tool("console-consumer", *bs, "--topic", "cli-pc", "--partition", "0", "--offset", "2",
             "--timeout-ms", "1500", "--property", "print.offset=true",
             "--property", "key.separator=|")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Offset:2|empty-key\nOffset:3|four\nOffset:4|five\n"
    assert r.stderr.strip().splitlines()[-1] == "Processed a total of 3 messages"

    # a line without the key separator stops the producer with one line, exit 1
    line = fails("console-producer", *bs, "--topic", "cli-pc", "--property", "parse.key=true",
                 stdin=b"no separator here\n")
    assert line == "Error: No key separator found on line number 1: 'no separator here'"


# ====================================================================== kafka-get-offsets

def test_get_offsets_latest_earliest_by_time(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker, "cli-go", 2)
    produce(broker, "cli-go", [(0, b"a", 1000), (0, b"b", 2000), (0, b"c", 3000), (1, b"d", 5000)])
    assert ok("get-offsets", *bs, "--topic", "cli-go") == "cli-go:0:3\ncli-go:1:1\n"
    assert ok("get-offsets", *bs, "--topic", "cli-go", "--time", "-2") == "cli-go:0:0\ncli-go:1:0\n"
    assert ok("get-offsets", *bs, "--topic", "cli-g.", "--time", "2000") == "cli-go:0:1\ncli-go:1:0\n"
    assert ok("get-offsets", *bs, "--topic", "cli-go", "--time", "4000",
              "--partitions", "0") == "cli-go:0:\n"
    assert ok("get-offsets", *bs, "--topic", "cli-go", "--time", "max-timestamp") == \
        "cli-go:0:2\ncli-go:1:0\n"
    assert fails("get-offsets", *bs, "--topic", "cli-nope") == \
        "Error: Could not match any topic-partitions with the specified filters"


# ====================================================================== kafka-configs

def test_configs_describe_alter_delete(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker, "cli-cfg", 1)
    assert ok("configs", *bs, "--describe", "--entity-type", "topics", "--entity-name", "cli-cfg") == \
        "Dynamic configs for topic cli-cfg are:\n"
    assert ok("configs", *bs, "--alter", "--topic", "cli-cfg", "--add-config",
              "retention.ms=5000,cleanup.policy=[compact,delete]") == \
        "Completed updating config for topic cli-cfg.\n"
    assert ok("configs", *bs, "--describe", "--topic", "cli-cfg").splitlines() == [
        "Dynamic configs for topic cli-cfg are:",
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}",
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}"]
    ok("configs", *bs, "--alter", "--topic", "cli-cfg", "--delete-config", "cleanup.policy")
    all_configs = ok("configs", *bs, "--describe", "--topic", "cli-cfg", "--all").splitlines()
    assert all_configs[0] == "All configs for topic cli-cfg are:"
    assert "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}" \
        in all_configs
    assert any(line.startswith("  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:")
               for line in all_configs)
    line = fails("configs", *bs, "--alter", "--topic", "cli-cfg", "--delete-config", "segment.ms")
    assert line == "Error while executing config command : Invalid config(s): segment.ms"
    # A read-only broker config (Kafka's too): the refusal in one line, in Kafka's words
    line = fails("configs", *bs, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                 "--add-config", "log.dirs=/tmp/elsewhere")
    assert line.startswith("Error while executing config command : ")
    assert "Cannot update these configs dynamically: Set(log.dirs)" in line
    line = fails("configs", *bs, "--describe", "--topic", "cli-cfg-nope")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in line and "cli-cfg-nope" in line


# ====================================================================== kafka-consumer-groups

def test_consumer_groups_list_describe_exact_lag(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker, "cli-lag", 2)
    produce(broker, "cli-lag", [(0, b"x", 0)] * 6 + [(1, b"y", 0)] * 4)
    commit(broker, "cli-lag-g", {("cli-lag", 0): 4, ("cli-lag", 1): 1})
    assert "cli-lag-g" in ok("consumer-groups", *bs, "--list").split("\n")
    r = tool("consumer-groups", *bs, "--describe", "--group", "cli-lag-g")
    assert r.returncode == 0
    assert r.stderr.strip() == "Consumer group 'cli-lag-g' has no active members."
    assert table(r.stdout) == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
         "HOST", "CLIENT-ID"],
        ["cli-lag-g", "cli-lag", "0", "4", "6", "2", "-", "-", "-"],
        ["cli-lag-g", "cli-lag", "1", "1", "4", "3", "-", "-", "-"]]
    assert table(ok("consumer-groups", *bs, "--describe", "--group", "cli-lag-g", "--state")) == [
        ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        ["cli-lag-g", broker.bootstrap, "(0)", "Empty", "0"]]
    assert fails("consumer-groups", *bs, "--describe", "--group", "cli-no-such-group") == \
        "Error: Consumer group 'cli-no-such-group' does not exist."


def test_reset_offsets_every_spec(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    g = ("--group", "cli-reset-g")
    base = 1_600_000_000_000
    create_topic(broker, "cli-reset", 2)
    produce(broker, "cli-reset", [(p, b"r", base + i * 1000) for p in (0, 1) for i in range(5)])
    commit(broker, "cli-reset-g", {("cli-reset", 0): 3, ("cli-reset", 1): 4})

    def plan(*args: str) -> list[list[str]]:
        return table(ok("consumer-groups", *bs, "--reset-offsets", *g, *args))

    header = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    # dry run (explicit and default): the plan, nothing changed
    assert plan("--topic", "cli-reset", "--to-earliest", "--dry-run") == [
        header, ["cli-reset-g", "cli-reset", "0", "0"], ["cli-reset-g", "cli-reset", "1", "0"]]
    r = tool("consumer-groups", *bs, "--reset-offsets", *g, "--all-topics", "--to-latest")
    assert r.returncode == 0 and "--execute option is missing" in r.stderr
    assert committed(broker, "cli-reset-g", "cli-reset", 2) == [3, 4]

    assert plan("--topic", "cli-reset", "--to-earliest", "--execute")[1:] == [
        ["cli-reset-g", "cli-reset", "0", "0"], ["cli-reset-g", "cli-reset", "1", "0"]]
    assert committed(broker, "cli-reset-g", "cli-reset", 2) == [0, 0]
    plan("--all-topics", "--to-latest", "--execute")
    assert committed(broker, "cli-reset-g", "cli-reset", 2) == [5, 5]
    plan("--topic", "cli-reset:1", "--to-offset", "2", "--execute")       # one partition only
    assert committed(broker, "cli-reset-g", "cli-reset", 2) == [5, 2]
    plan("--topic", "cli-reset", "--shift-by", "-3", "--execute")         # 5-3, and 2-3 clamped to 0
    assert committed(broker, "cli-reset-g", "cli-reset", 2) == [2, 0]
    when = dt.datetime.fromtimestamp((base + 3000) / 1000, dt.timezone.utc)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert plan("--all-topics", "--to-datetime", stamp, "--execute")[1:] == [
        ["cli-reset-g", "cli-reset", "0", "3"], ["cli-reset-g", "cli-reset", "1", "3"]]
    assert committed(broker, "cli-reset-g", "cli-reset", 2) == [3, 3]
    # verified by --describe too
    rows = table(ok("consumer-groups", *bs, "--describe", *g))
    assert [r[:6] for r in rows[1:]] == [["cli-reset-g", "cli-reset", "0", "3", "5", "2"],
                                         ["cli-reset-g", "cli-reset", "1", "3", "5", "2"]]
    assert fails("consumer-groups", *bs, "--reset-offsets", *g, "--topic", "cli-reset-nope",
                 "--to-earliest") == "Error: Topic 'cli-reset-nope' does not exist."


def test_reset_refused_while_active_then_delete(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker, "cli-active", 1)
    produce(broker, "cli-active", [(0, b"a", 0), (0, b"b", 0)])
    member = subprocess.Popen([str(REPO / "bin" / "kafka-console-consumer.sh"), *bs,
                               "--topic", "cli-active", "--group", "cli-active-g",
                               "--from-beginning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=REPO)
    try:
        # The member has joined and consumed both records once it printed them.
        assert member.stdout.readline() == b"a\n" and member.stdout.readline() == b"b\n"
        wait_until(lambda: "Stable" in tool("consumer-groups", *bs, "--describe", "--group",
                                            "cli-active-g", "--state").stdout, 30, "a Stable group")
        line = fails("consumer-groups", *bs, "--reset-offsets", "--group", "cli-active-g",
                     "--topic", "cli-active", "--to-earliest", "--execute")
        assert line == ("Error: Assignments can only be reset if the group 'cli-active-g' is "
                        "inactive, but the current state is Stable.")
        rows = table(ok("consumer-groups", *bs, "--describe", "--group", "cli-active-g"))
        assert rows[1][:3] == ["cli-active-g", "cli-active", "0"] and rows[1][-1] == "console-consumer"
        members = table(ok("consumer-groups", *bs, "--describe", "--group", "cli-active-g", "--members"))
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert members[1][0] == "cli-active-g" and members[1][-1] == "1"
        line = fails("consumer-groups", *bs, "--delete", "--group", "cli-active-g")
        assert "NON_EMPTY_GROUP" in line
    finally:
        member.send_signal(signal.SIGTERM)       # handled like Ctrl-C: summary, commit, leave
        _, err = member.communicate(timeout=30)
    assert member.returncode == 0
    assert err.decode().strip().splitlines()[-1] == "Processed a total of 2 messages"
    assert committed(broker, "cli-active-g", "cli-active", 1) == [2]     # auto-commit at close
    wait_until(lambda: "Empty" in tool("consumer-groups", *bs, "--describe", "--group",
                                       "cli-active-g", "--state").stdout, 30, "an Empty group")
    ok("consumer-groups", *bs, "--reset-offsets", "--group", "cli-active-g", "--topic",
       "cli-active", "--to-earliest", "--execute")
    assert committed(broker, "cli-active-g", "cli-active", 1) == [0]
    assert ok("consumer-groups", *bs, "--delete", "--group", "cli-active-g") == \
        "Deletion of requested consumer groups ('cli-active-g') was successful.\n"
    assert "cli-active-g" not in ok("consumer-groups", *bs, "--list").split("\n")


# ====================================================================== bad input

def test_unreachable_broker_fails_fast_with_one_line():
    dead = f"127.0.0.1:{free_port()}"
    refused = f"Connection to node -1 (127.0.0.1/{dead}) could not be established. Broker may not be available."
    start = time.monotonic()
    line = fails("topics", "--bootstrap-server", dead, "--list")
    assert line == "Error while executing topic command : " + refused
    line = fails("console-producer", "--bootstrap-server", dead, "--topic", "t", stdin=b"x\n")
    assert line == "Error: " + refused
    line = fails("console-consumer", "--bootstrap-server", dead, "--topic", "t")
    assert line == "Error: " + refused
    assert time.monotonic() - start < 6        # three refusals, not three 10 s timeouts


def test_bad_flags_and_missing_arguments(broker):
    bs = ("--bootstrap-server", broker.bootstrap)
    assert "unrecognized arguments: --no-such-flag" in fails("topics", *bs, "--list",
                                                             "--no-such-flag", rc=2)
    assert "--topic" in fails("console-producer", *bs, rc=2, stdin=b"")
    assert "--bootstrap-server" in fails("get-offsets", "--topic", "x")
    assert fails("topics", *bs, "--create") == \
        "Error while executing topic command : --topic is required with --create, --alter and --delete"
    assert fails("console-consumer", *bs, "--topic", "cli-missing", "--partition", "0") == \
        "Error: Topic 'cli-missing' does not exist."
    assert "reset scopes" in fails("consumer-groups", *bs, "--reset-offsets", "--group", "g",
                                   "--to-earliest")
    assert "Error parsing timestamp" in fails("consumer-groups", *bs, "--reset-offsets", "--group",
                                              "g", "--all-topics", "--to-datetime", "yesterday")
    for name in TOOLS:
        r = tool(name, "--help")
        assert r.returncode == 0 and "--bootstrap-server" in r.stdout, name


def test_command_config_file_is_used(broker, tmp_path):
    bs = ("--bootstrap-server", broker.bootstrap)
    good = tmp_path / "admin.properties"
    good.write_text("client.id=cli-test\nrequest.timeout.ms=5000\n")
    assert ok("topics", *bs, "--list", "--command-config", str(good)) is not None
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.admin.key=1\n")
    line = fails("topics", *bs, "--list", "--command-config", str(bad))
    assert "no.such.admin.key" in line
    line = fails("topics", *bs, "--list", "--command-config", str(tmp_path / "missing.properties"))
    assert "cannot read config file" in line
