"""bin/kafka-reassign-partitions.sh against a real cluster (ZooKeeper, the controller): three
brokers run, a fourth joins, --generate proposes a plan over brokers 1,2,3, --execute starts
it with a throttle (set on the brokers and topics as Kafka's tool sets it), --verify follows
it to the end and clears the throttles, and the partitions end on the planned replicas in
ZooKeeper and in Metadata with their records. A move throttled to a trickle is listed and
cancelled. Bad input gets Kafka's one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient as CkAdminClient
from confluent_kafka.admin import NewTopic

from clients.admin import AdminClient
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Brokers 0-2 running; broker 3 configured but started by the first test (a broker added
    to a running cluster)."""
    c = Cluster(tmp_path_factory.mktemp("reassign-tool") / "c", brokers=4,
                overrides={"auto.leader.rebalance.enable": "false"}, default_replication_factor=2)
    try:
        c.start(only=3)
        yield c
    finally:
        c.stop()


def tool(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(REPO / "bin" / "kafka-reassign-partitions.sh"), *args], capture_output=True,
                          timeout=timeout, cwd=REPO, env=dict(os.environ))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def create(c: Cluster, topic: str, replicas: list[list[int]]) -> None:
    admin = CkAdminClient({"bootstrap.servers": c.bootstrap_except(3), "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas,
                                  config={"min.insync.replicas": "1"})])[topic].result(30)
    for p in range(len(replicas)):
        c.wait_until(lambda p=p: sorted(c.isr(topic, p)) == sorted(replicas[p]), timeout=30)


def produce(c: Cluster, topic: str, partitions: int, per_partition: int, size: int = 100) -> None:
    p = Producer({"bootstrap.servers": c.bootstrap_except(3), "acks": "all", "log_level": 0,
                  "linger.ms": 20})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, value=b"%d-" % i + b"x" * size, partition=part)
        p.poll(0)
    assert p.flush(60) == 0


def count_records(c: Cluster, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"count-{time.monotonic()}",
                         "enable.auto.commit": False, "log_level": 0})
    counts: dict[int, int] = {}
    for part in range(partitions):
        low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, part), timeout=10)
        counts[part] = high - low
    consumer.close()
    return counts


def assignment(c: Cluster, topic: str) -> dict[int, list[int]]:
    return {int(p): r for p, r in c._get_json(f"/brokers/topics/{topic}")["partitions"].items()}


def json_after(out: str, heading: str) -> dict:
    lines = out.splitlines()
    start = lines.index(heading) + 1
    text = next(line for line in lines[start:] if line.strip())
    return json.loads(text)


def dynamic(admin: AdminClient, kind: str, name: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The keys set on the resource itself (not defaults)."""
    entries = admin.describe_configs(kind, name, list(keys))
    return {k: e.value for k, e in entries.items()
            if k in keys and e.source in ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG") and e.value is not None}


def test_generate_execute_verify_onto_an_added_broker(cluster, tmp_path):
    topic, partitions = "moving", 6
    create(cluster, topic, [[p % 3, (p + 1) % 3] for p in range(partitions)])
    produce(cluster, topic, partitions, 200)
    before = count_records(cluster, topic, partitions)
    assert set(before.values()) == {200}

    cluster.broker(3).start(60)                  # the broker being added
    cluster.wait_for_brokers(4)
    cluster.wait_for_brokers_known(count=4)

    bs = ("--bootstrap-server", cluster.bootstrap)
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    gen = tool(*bs, "--generate", "--topics-to-move-json-file", str(topics_file), "--broker-list", "1,2,3")
    assert gen.returncode == 0, gen.stderr
    current = json_after(gen.stdout, "Current partition replica assignment")
    proposed = json_after(gen.stdout, "Proposed partition reassignment configuration")
    assert {(e["partition"], tuple(e["replicas"])) for e in current["partitions"]} == \
        {(p, (p % 3, (p + 1) % 3)) for p in range(partitions)}
    plan = {e["partition"]: e["replicas"] for e in proposed["partitions"]}
    assert sorted(plan) == list(range(partitions))
    for replicas in plan.values():
        assert len(replicas) == 2 and len(set(replicas)) == 2 and set(replicas) <= {1, 2, 3}
    assert {b: sum(r[0] == b for r in plan.values()) for b in (1, 2, 3)} == {1: 2, 2: 2, 3: 2}

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(proposed))
    throttle = 50_000_000
    ex = tool(*bs, "--execute", "--reassignment-json-file", str(plan_file), "--throttle", str(throttle))
    assert ex.returncode == 0, ex.stderr
    assert "Save this to use as the --reassignment-json-file option during rollback" in ex.stdout
    assert json_after(ex.stdout, "Current partition replica assignment") == current
    assert f"The inter-broker throttle limit was set to {throttle} B/s" in ex.stdout
    names = ",".join(f"{topic}-{p}" for p in range(partitions))
    assert f"Successfully started partition reassignments for {names}" in ex.stdout

    # The throttles stay until --verify sees the move finished (Kafka's tool sets them before
    # the move and only --verify clears them).
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        for broker in range(4):
            assert dynamic(admin, "broker", str(broker), RATE_KEYS) == dict.fromkeys(RATE_KEYS, str(throttle))
        topic_throttles = dynamic(admin, "topic", topic, REPLICA_KEYS)
    leaders = {f"{p}:{b}" for p in range(partitions) for b in (p % 3, (p + 1) % 3)}
    followers = {f"{p}:{b}" for p, r in plan.items() for b in r if b not in (p % 3, (p + 1) % 3)}
    assert set(topic_throttles[REPLICA_KEYS[0]].split(",")) == leaders
    assert set(topic_throttles[REPLICA_KEYS[1]].split(",")) == followers

    deadline = time.monotonic() + 90
    while True:
        ver = tool(*bs, "--verify", "--reassignment-json-file", str(plan_file))
        assert ver.returncode == 0, ver.stderr
        if "still in progress" not in ver.stdout:
            break
        assert "Clearing" not in ver.stdout            # throttles stay while anything moves
        assert time.monotonic() < deadline, ver.stdout
        time.sleep(1)
    for p in range(partitions):
        assert f"Reassignment of partition {topic}-{p} is completed." in ver.stdout
    assert "Clearing broker-level throttles on brokers 0,1,2,3" in ver.stdout
    assert f"Clearing topic-level throttles on topic {topic}" in ver.stdout

    assert assignment(cluster, topic) == plan
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        described = admin.describe_topics([topic])[topic]
        assert {d.partition: d.replicas for d in described.partitions} == plan
        for broker in range(4):
            assert dynamic(admin, "broker", str(broker), RATE_KEYS) == {}
        assert dynamic(admin, "topic", topic, REPLICA_KEYS) == {}
    for p in range(partitions):
        cluster.wait_until(lambda p=p: sorted(cluster.isr(topic, p)) == sorted(plan[p]), timeout=30)
    assert count_records(cluster, topic, partitions) == before
    assert tool(*bs, "--list").stdout.strip() == "No partition reassignments found."


def test_a_trickle_throttled_move_is_listed_and_cancelled(cluster, tmp_path):
    topic = "trickle"
    create(cluster, topic, [[0]])
    produce(cluster, topic, 1, 2000, size=1000)           # ~2 MB at 10 kB/s: minutes
    bs = ("--bootstrap-server", cluster.bootstrap)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text('{"version":1,"partitions":[{"topic":"trickle","partition":0,"replicas":[1]}]}')
    ex = tool(*bs, "--execute", "--reassignment-json-file", str(plan_file), "--throttle", "10000")
    assert ex.returncode == 0, ex.stderr
    assert "Warning: You must run --verify periodically" in ex.stdout
    assert "Successfully started partition reassignment for trickle-0" in ex.stdout

    listed = tool(*bs, "--list")
    assert listed.stdout.splitlines() == ["Current partition reassignments:",
                                          "trickle-0: replicas: 1,0. adding: 1. removing: 0."], listed.stdout
    again = tool(*bs, "--execute", "--reassignment-json-file", str(plan_file))
    assert again.returncode == 1
    assert again.stderr.startswith("Error: Cannot execute because there is an existing partition assignment.")
    ver = tool(*bs, "--verify", "--reassignment-json-file", str(plan_file))
    assert "Reassignment of partition trickle-0 is still in progress." in ver.stdout
    assert "Clearing" not in ver.stdout
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert dynamic(admin, "topic", topic, REPLICA_KEYS) == {REPLICA_KEYS[0]: "0:0", REPLICA_KEYS[1]: "0:1"}
        assert dynamic(admin, "broker", "1", RATE_KEYS) == dict.fromkeys(RATE_KEYS, "10000")

    cancel = tool(*bs, "--cancel", "--reassignment-json-file", str(plan_file))
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.splitlines()[0] == "Successfully cancelled partition reassignment for: trickle-0"
    assert "Clearing topic-level throttles on topic trickle" in cancel.stdout
    assert assignment(cluster, topic) == {0: [0]}
    assert tool(*bs, "--list").stdout.strip() == "No partition reassignments found."
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert dynamic(admin, "topic", topic, REPLICA_KEYS) == {}
        assert dynamic(admin, "broker", "1", RATE_KEYS) == {}
    cancelled = tool(*bs, "--cancel", "--reassignment-json-file", str(plan_file), "--preserve-throttles")
    assert cancelled.stdout.splitlines()[0] == "None of the specified partition reassignments are active."
    assert count_records(cluster, topic, 1) == {0: 2000}


@pytest.mark.parametrize("args,error", [
    (("--generate", "--topics-to-move-json-file", "{topics}", "--broker-list", "0,1"),
     "Error: Topic nope not found."),
    (("--execute", "--reassignment-json-file", "{unknown_broker}"), "Error: Unknown broker id 7"),
    (("--execute", "--reassignment-json-file", "{unknown_partition}"), "Error: Unable to find partition: inputs-40"),
    (("--verify", "--reassignment-json-file", "{bad_json}"), "Error: The input string is not a valid JSON"),
])
def test_bad_input_is_one_line_and_exit_1(cluster, tmp_path, args, error):
    files = {"topics": '{"version":1,"topics":[{"topic":"nope"}]}',
             "unknown_broker": '{"version":1,"partitions":[{"topic":"inputs","partition":0,"replicas":[1,7]}]}',
             "unknown_partition": '{"version":1,"partitions":[{"topic":"inputs","partition":40,"replicas":[1,2]}]}',
             "bad_json": '{"version":1,"partitions":['}
    if cluster.partition_state("inputs", 0) is None:
        create(cluster, "inputs", [[0, 1]])
    paths = {}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths[name] = str(tmp_path / name)
    r = tool("--bootstrap-server", cluster.bootstrap, *(a.format(**paths) for a in args))
    assert r.returncode == 1, r.stdout
    assert r.stderr.startswith(error) and r.stderr.count("\n") == 1, r.stderr


def test_a_move_that_cannot_finish_is_listed_verified_and_cancelled(cluster, tmp_path):
    """Without relying on throttling: the new replica's broker is paused (SIGSTOP), so the
    move stays in progress until --cancel puts the partition back."""
    topic = "stuck"
    if cluster.broker_ids() != [0, 1, 2, 3]:
        cluster.broker(3).start(60)
        cluster.wait_for_brokers(4)
        cluster.wait_for_brokers_known(count=4)
    create(cluster, topic, [[0, 1]])
    produce(cluster, topic, 1, 100)
    bs = ("--bootstrap-server", cluster.bootstrap_except(3))
    plan_file = tmp_path / "plan.json"
    plan_file.write_text('{"version":1,"partitions":[{"topic":"stuck","partition":0,"replicas":[0,3]}]}')
    cluster.sigstop(3)
    try:
        ex = tool(*bs, "--execute", "--reassignment-json-file", str(plan_file))
        assert ex.returncode == 0, ex.stderr
        assert "Successfully started partition reassignment for stuck-0" in ex.stdout
        assert "throttle" not in ex.stdout
        listed = tool(*bs, "--list")
        assert listed.stdout.splitlines() == ["Current partition reassignments:",
                                              "stuck-0: replicas: 0,3,1. adding: 3. removing: 1."], listed.stdout
        again = tool(*bs, "--execute", "--reassignment-json-file", str(plan_file))
        assert again.returncode == 1
        assert again.stderr.startswith("Error: Cannot execute because there is an existing partition assignment.")
        ver = tool(*bs, "--verify", "--reassignment-json-file", str(plan_file), "--preserve-throttles")
        assert ver.stdout.splitlines() == ["Status of partition reassignment:",
                                           "Reassignment of partition stuck-0 is still in progress."], ver.stdout
        cancel = tool(*bs, "--cancel", "--reassignment-json-file", str(plan_file), "--preserve-throttles")
        assert cancel.returncode == 0, cancel.stderr
        assert cancel.stdout.splitlines() == ["Successfully cancelled partition reassignment for: stuck-0",
                                              "None of the specified partition moves are active."], cancel.stdout
        assert assignment(cluster, topic) == {0: [0, 1]}
        assert tool(*bs, "--list").stdout.strip() == "No partition reassignments found."
        ver = tool(*bs, "--verify", "--reassignment-json-file", str(plan_file), "--preserve-throttles")
        assert ver.stdout.splitlines()[1] == \
            "There is no active reassignment of partition stuck-0, but replica set is 0,1 rather than 0,3."
        again = tool(*bs, "--cancel", "--reassignment-json-file", str(plan_file), "--preserve-throttles")
        assert again.stdout.splitlines()[0] == "None of the specified partition reassignments are active."
    finally:
        cluster.sigcont(3)
    assert count_records(cluster, topic, 1) == {0: 100}
