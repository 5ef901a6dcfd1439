"""kafka-reassign-partitions' logic without a cluster: Kafka's replica placement (the plan
--generate proposes), the reassignment JSON both ways, the throttled replicas --execute
sets, the option checks and the texts --verify and --list print."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from clients.aio.log_dir_types import TopicPartitionReplica
from clients.aio.reassignment import (BrokerRack, PartitionReassignment, alter_reassignments_request,
                                      assign_replicas_to_brokers, list_reassignments_request,
                                      rack_alternated_brokers)
from clients.cli import reassign_partitions as tool
from clients.cli.common import CliError
from clients.types import TopicPartition


def brokers(*ids: int, racks: dict[int, str] | None = None) -> list[BrokerRack]:
    return [BrokerRack(b, (racks or {}).get(b)) for b in ids]


# ---------------------------------------------------------------------------- placement

def test_placement_matches_kafkas_documented_example():
    # AdminUtils' javadoc: 5 brokers, 10 partitions, 3 replicas, start 0.
    plan = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start=0)
    assert plan[0] == [0, 1, 2]
    assert plan[4] == [4, 0, 1]
    assert plan[5] == [0, 2, 3]
    assert plan[9] == [4, 1, 2]


@pytest.mark.parametrize("n_brokers,partitions,rf", [(3, 20, 3), (4, 20, 3), (5, 7, 2), (6, 12, 3),
                                                     (4, 8, 4), (7, 1, 1)])
@pytest.mark.parametrize("seed", range(5))
def test_every_partition_gets_rf_distinct_brokers_from_the_list_and_shares_are_even(
        n_brokers, partitions, rf, seed):
    ids = [10 + 3 * i for i in range(n_brokers)]          # ids need not be 0..n-1
    plan = assign_replicas_to_brokers(brokers(*ids), partitions, rf, rng=random.Random(seed))
    assert sorted(plan) == list(range(partitions))
    for replicas in plan.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in plan.values())
    replicas = Counter(b for r in plan.values() for b in r)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1, leaders
    # Followers shift once per wrap of the leaders, so replica counts stay within rf of each other.
    assert max(replicas.values()) - min(replicas.get(b, 0) for b in ids) <= rf, replicas
    if partitions % n_brokers == 0:
        assert len(set(replicas.values())) == 1, replicas


def test_random_start_varies_and_a_fixed_start_repeats():
    bs = brokers(0, 1, 2, 3)
    plans = {tuple(map(tuple, assign_replicas_to_brokers(bs, 8, 2, rng=random.Random(s)).values()))
             for s in range(20)}
    assert len(plans) > 1
    assert assign_replicas_to_brokers(bs, 8, 2, fixed_start=1) == assign_replicas_to_brokers(bs, 8, 2, fixed_start=1)


def test_rack_alternated_list_is_kafkas():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b", 6: "c", 7: "c", 8: "c"}) \
        == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_placement_matches_kafkas_documented_example():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    plan = assign_replicas_to_brokers(brokers(*racks, racks=racks), 7, 3, fixed_start=0)
    assert [plan[p] for p in range(7)] == [[0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0],
                                           [2, 0, 3], [0, 4, 2]]


@pytest.mark.parametrize("seed", range(10))
def test_rack_aware_placement_puts_replicas_on_distinct_racks(seed):
    racks = {b: f"r{b % 3}" for b in range(9)}
    plan = assign_replicas_to_brokers(brokers(*racks, racks=racks), 24, 3, rng=random.Random(seed))
    for replicas in plan.values():
        assert len({racks[b] for b in replicas}) == 3, replicas
    # Fewer replicas than racks: no rack twice; more: every rack at least once.
    for rf in (2, 4):
        for replicas in assign_replicas_to_brokers(brokers(*racks, racks=racks), 9, rf,
                                                   rng=random.Random(seed)).values():
            assert len({racks[b] for b in replicas}) == min(rf, 3)
            assert len(set(replicas)) == rf


def test_placement_refuses_what_kafka_refuses():
    with pytest.raises(ValueError, match=r"^Replication factor: 4 larger than available brokers: 3\.$"):
        assign_replicas_to_brokers(brokers(0, 1, 2), 3, 4)
    with pytest.raises(ValueError, match="Replication factor must be larger than 0."):
        assign_replicas_to_brokers(brokers(0, 1, 2), 3, 0)
    with pytest.raises(ValueError, match="Number of partitions must be larger than 0."):
        assign_replicas_to_brokers(brokers(0, 1, 2), 0, 1)
    with pytest.raises(ValueError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers(brokers(0, 1, 2, racks={0: "a", 1: "b"}), 3, 2)


def test_generate_proposes_each_topic_with_its_replication_factor():
    current = {TopicPartition("a", p): [0, 1, 2] for p in range(4)}
    current.update({TopicPartition("b", p): [1] for p in range(3)})
    proposed = tool.propose_assignment(current, [(0, None), (1, None), (2, None), (3, None)], fixed_start=0)
    assert set(proposed) == set(current)
    assert {len(proposed[tp]) for tp in current if tp.topic == "a"} == {3}
    assert {len(proposed[tp]) for tp in current if tp.topic == "b"} == {1}
    with pytest.raises(CliError, match="Replication factor: 3 larger than available brokers: 2."):
        tool.propose_assignment(current, [(0, None), (1, None)])


# ---------------------------------------------------------------------------- JSON

def test_reassignment_json_is_kafkas_and_round_trips():
    assignment = {TopicPartition("t", 1): [2, 3, 1], TopicPartition("t", 0): [1, 2, 3],
                  TopicPartition("a", 0): [3]}
    dirs = {TopicPartitionReplica("t", 0, 2): "/data/b"}
    text = tool.format_reassignment(assignment, dirs)
    assert text == ('{"version":1,"partitions":['
                    '{"topic":"a","partition":0,"replicas":[3],"log_dirs":["any"]},'
                    '{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","/data/b","any"]},'
                    '{"topic":"t","partition":1,"replicas":[2,3,1],"log_dirs":["any","any","any"]}]}')
    plan = tool.parse_reassignment(text)
    assert plan.targets() == assignment
    assert plan.log_dirs == dirs


def test_reassignment_json_without_version_or_log_dirs_is_read():
    plan = tool.parse_reassignment('{"partitions":[{"topic":"t","partition":2,"replicas":[4,5]}]}')
    assert plan.partitions == [(TopicPartition("t", 2), [4, 5])] and plan.log_dirs == {}


@pytest.mark.parametrize("text,message", [
    ("{nope", "The input string is not a valid JSON"),
    ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
    ('{"partitions":[{"topic":"t","replicas":[1]}]}', "No such field exists: `partition`"),
    ('{"partitions":[{"topic":"t","partition":0}]}', "No such field exists: `replicas`"),
    ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', "Expected an integer for partition"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     r"Size of replicas list \[1, 2\] is different from size of log dirs list \[any\] for partition t-0"),
])
def test_bad_reassignment_json_gets_one_line(text, message):
    with pytest.raises(CliError, match=message) as e:
        tool.parse_reassignment(text)
    assert "\n" not in e.value.message


@pytest.mark.parametrize("text,message", [
    ('{"partitions":[]}', "Partition reassignment list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "Partition replica list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
     "Partition reassignment contains duplicate topic partitions: t-0"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}',
     "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1"),
])
def test_execute_refuses_plans_kafka_refuses(text, message):
    with pytest.raises(CliError, match=message):
        tool.check_executable(tool.parse_reassignment(text))


def test_topics_to_move_and_broker_list():
    assert tool.parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]
    with pytest.raises(CliError, match="No such field exists: `topic`"):
        tool.parse_topics_to_move('{"topics":[{"name":"a"}]}')
    with pytest.raises(CliError, match="The input string is not a valid JSON"):
        tool.parse_topics_to_move("topics: a")
    assert tool.parse_broker_list("0,1,2") == [0, 1, 2]
    with pytest.raises(CliError, match=r"Broker list contains duplicate entries: \[1\]"):
        tool.parse_broker_list("1,0,1")
    with pytest.raises(CliError, match="expected broker ids"):
        tool.parse_broker_list("0,x")


def test_request_bodies():
    body = alter_reassignments_request({TopicPartition("t", 0): [1, 2], TopicPartition("t", 1): None,
                                        TopicPartition("u", 3): (4,)}, 5000)
    assert body == {"timeout_ms": 5000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 2]},
                                     {"partition_index": 1, "replicas": None}]},
        {"name": "u", "partitions": [{"partition_index": 3, "replicas": [4]}]}]}
    assert list_reassignments_request(None, 10)["topics"] is None
    assert list_reassignments_request([TopicPartition("t", 2), TopicPartition("t", 0)], 10)["topics"] == \
        [{"name": "t", "partition_indexes": [2, 0]}]


# ---------------------------------------------------------------------------- throttles

def test_throttled_replicas_are_the_sources_and_the_added_destinations():
    current = {TopicPartition("t", 0): [0, 1, 2], TopicPartition("t", 1): [1, 2, 0],
               TopicPartition("u", 0): [2]}
    proposed = {TopicPartition("t", 0): [1, 2, 3], TopicPartition("t", 1): [1, 2, 0],
                TopicPartition("u", 0): [3]}
    moves = tool.move_map({}, proposed, current)
    assert tool.throttled_replicas(moves) == {
        "t": ("0:0,0:1,0:2,1:0,1:1,1:2", "0:3"),
        "u": ("0:2", "0:3")}
    assert tool.reassigning_brokers(moves) == [0, 1, 2, 3]


def test_a_partition_already_moving_keeps_its_original_sources():
    # t-0 is moving 0,1 -> 2,3 (replicas now 2,3,0,1); resubmitted with --additional to 3,4:
    # the throttle must still cover 0 and 1, which hold the data, not 2 which is catching up.
    moving = {TopicPartition("t", 0): PartitionReassignment([2, 3, 0, 1], [2, 3], [0, 1]),
              TopicPartition("v", 5): PartitionReassignment([7, 8], [8], [])}
    moves = tool.move_map(moving, {TopicPartition("t", 0): [3, 4]}, {TopicPartition("t", 0): [2, 3, 0, 1]})
    assert tool.throttled_replicas(moves) == {"t": ("0:0,0:1", "0:3,0:4"), "v": ("5:7", "5:8")}


# ---------------------------------------------------------------------------- options

def parse(*argv: str):
    return tool.build_parser().parse_args(list(argv))


BS = ("--bootstrap-server", "localhost:9092")


@pytest.mark.parametrize("argv,message", [
    (BS, "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
    ((*BS, "--verify", "--list"), "Command must include exactly one action"),
    (("--list",), "Please specify --bootstrap-server"),
    ((*BS, "--execute"), 'Missing required argument "[reassignment-json-file]"'),
    ((*BS, "--generate", "--topics-to-move-json-file", "f"), 'Missing required argument "[broker-list]"'),
    ((*BS, "--execute", "--reassignment-json-file", "f", "--topics-to-move-json-file", "f"),
     'Option "[topics-to-move-json-file]" can\'t be used with action "[execute]"'),
    ((*BS, "--execute", "--reassignment-json-file", "f", "--preserve-throttles"),
     'Option "[preserve-throttles]" can\'t be used with action "[execute]"'),
    ((*BS, "--verify", "--reassignment-json-file", "f", "--throttle", "5"),
     'Option "[throttle]" can\'t be used with action "[verify]"'),
    ((*BS, "--cancel", "--reassignment-json-file", "f", "--additional"),
     'Option "[additional]" can\'t be used with action "[cancel]"'),
    ((*BS, "--list", "--broker-list", "1"), 'Option "[broker-list]" can\'t be used with action "[list]"'),
])
def test_option_checks_say_what_kafka_says(argv, message):
    with pytest.raises(CliError) as e:
        tool.validate(parse(*argv))
    assert e.value.message.startswith(message), e.value.message


@pytest.mark.parametrize("argv,action", [
    ((*BS, "--list"), "list"),
    ((*BS, "--execute", "--reassignment-json-file", "f", "--throttle", "100", "--additional",
      "--timeout", "5", "--replica-alter-log-dirs-throttle", "9"), "execute"),
    ((*BS, "--cancel", "--reassignment-json-file", "f", "--preserve-throttles", "--timeout", "5"), "cancel"),
    ((*BS, "--generate", "--topics-to-move-json-file", "f", "--broker-list", "1,2", "--disable-rack-aware"),
     "generate"),
])
def test_allowed_combinations(argv, action):
    assert tool.validate(parse(*argv)) == action


def test_a_bad_file_is_one_line_and_exit_1_before_any_connection(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}')
    # Port 9 (discard) is closed: reaching for the cluster would be a different error.
    rc = tool.main(["--bootstrap-server", "127.0.0.1:9", "--execute", "--reassignment-json-file", str(bad)])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == "Error: Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1\n"
    rc = tool.main(["--bootstrap-server", "127.0.0.1:9", "--verify", "--reassignment-json-file",
                    str(tmp_path / "missing.json")])
    assert rc == 1 and capsys.readouterr().err.startswith("Error: cannot read ")


# ---------------------------------------------------------------------------- texts

def test_verify_text():
    states = {TopicPartition("t", 1): tool.PartitionState([1, 2], [1, 2], True),
              TopicPartition("t", 0): tool.PartitionState([1, 2, 3], [2, 3], False),
              TopicPartition("a", 0): tool.PartitionState([1, 2], [3, 4], True)}
    assert tool.format_states(states).splitlines() == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition a-0, but replica set is 1,2 rather than 3,4.",
        "Reassignment of partition t-0 is still in progress.",
        "Reassignment of partition t-1 is completed."]


def test_log_dir_move_text():
    r = TopicPartitionReplica
    moves = {r("t", 0, 1): tool.LogDirMove("/b", "/a", "/b"),
             r("t", 1, 1): tool.LogDirMove("/b", "/b", None),
             r("t", 2, 1): tool.LogDirMove("/b", "/a", None),
             r("t", 3, 1): tool.LogDirMove("/b", "/a", "/c"),
             r("t", 4, 1): tool.LogDirMove("/b", None, None),
             r("t", 0, 0): tool.LogDirMove("/b", None, None, answered=False)}
    assert tool.format_log_dir_moves(moves).splitlines() == [
        "Partition t-0 cannot be found in any live log directory on broker 0.",
        "Reassignment of replica t-0-1 is still in progress.",
        "Reassignment of replica t-1-1 completed successfully.",
        "Partition t-2 on broker 1 is not being moved from log dir /a to /b.",
        "Partition t-3 on broker 1 is being moved to log dir /c instead of /b.",
        "Partition t-4 is not found in any live log dir on broker 1. There is likely an offline log directory on the broker."]
    assert [m.done for m in moves.values()] == [False, True, True, False, False, False]


def test_list_text():
    assert tool.format_in_progress({}) == "No partition reassignments found."
    text = tool.format_in_progress({
        TopicPartition("t", 1): PartitionReassignment([3, 1, 2], [3], [1]),
        TopicPartition("t", 0): PartitionReassignment([1, 2], [], [])})
    assert text.splitlines() == ["Current partition reassignments:", "t-0: replicas: 1,2.",
                                 "t-1: replicas: 3,1,2. adding: 3. removing: 1."]


def test_generated_json_parses_as_a_reassignment():
    proposed = tool.propose_assignment({TopicPartition("t", p): [0, 1] for p in range(5)},
                                       [(0, None), (1, None), (2, None)])
    plan = tool.parse_reassignment(tool.format_reassignment(proposed))
    tool.check_executable(plan)
    assert plan.targets() == proposed
    assert json.loads(tool.format_reassignment(proposed))["version"] == 1
