"""kafka-leader-election's option checks, election file and report, without a broker."""
from __future__ import annotations

import argparse
import io

import pytest

from clients.cli.leader_election import build_parser, parse_election_file, report, validate
from clients.cli.common import CliError
from clients.protocol.errors import ElectionNotNeededError, PreferredLeaderNotAvailableError
from clients.types import TopicPartition


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv, message", [
    (("--election-type", "preferred", "--all-topic-partitions"), "Missing required option(s): --bootstrap-server"),
    (("--bootstrap-server", "h:1", "--all-topic-partitions"), "Missing required option(s): --election-type"),
    (("--bootstrap-server", "h:1", "--election-type", "preferred"),
     "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"),
    (("--bootstrap-server", "h:1", "--election-type", "preferred", "--all-topic-partitions", "--topic", "t"),
     "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"),
    (("--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"), "Missing required option(s): --partition"),
    (("--bootstrap-server", "h:1", "--election-type", "preferred", "--all-topic-partitions", "--partition", "1"),
     "Option --partition is only allowed if --topic is used"),
])
def test_kafka_option_rules(argv, message):
    with pytest.raises(CliError) as e:
        validate(args(*argv))
    assert e.value.message == message


def test_election_type_is_case_insensitive():
    assert args("--election-type", "PREFERRED").election_type == "preferred"


def test_election_file():
    text = '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "bar", "partition": 0}]}'
    assert parse_election_file(text, "f.json") == [TopicPartition("foo", 1), TopicPartition("bar", 0)]
    with pytest.raises(CliError, match="duplicate partitions: foo-1"):
        parse_election_file('{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foo", "partition": 1}]}', "f")
    with pytest.raises(CliError, match="missing or malformed"):
        parse_election_file('{"topics": []}', "f")


def test_report_lines_and_exit_status(capsys):
    out = io.StringIO()
    rc = report("preferred", {TopicPartition("t", 1): None, TopicPartition("t", 0): None,
                              TopicPartition("u", 0): ElectionNotNeededError("partition u-0"),
                              TopicPartition("v", 2): PreferredLeaderNotAvailableError("partition v-2: down")}, out)
    assert rc == 1
    assert out.getvalue().splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions u-0",
        "Error completing leader election (PREFERRED) for partition: v-2: "
        "PreferredLeaderNotAvailableError: partition v-2: down"]
    assert capsys.readouterr().err.strip() == "Error: 1 replica(s) could not be elected"
    assert report("unclean", {}, io.StringIO()) == 0
