"""v3's create-topic body read as Confluent's Jackson mapping reads CreateTopicRequest: a
value of the wrong type or out of its Java type's range is the client's 400, never a 500."""
from __future__ import annotations

from typing import Any

import pytest

from clients.rest.errors import RestError
from clients.rest.v3_admin import parse_create_topic


@pytest.mark.parametrize("body", [
    {"topic_name": "t", "configs": 5},
    {"topic_name": "t", "configs": {"cleanup.policy": "compact"}},
    {"topic_name": "t", "replicas_assignments": 5},
    {"topic_name": "t", "partitions_count": 10 ** 12},
    {"topic_name": "t", "partitions_count": -(2 ** 31) - 1},
    {"topic_name": "t", "replication_factor": 2 ** 15},
    {"topic_name": "t", "replicas_assignments": [{"partition_id": 2 ** 31, "broker_ids": [0]}]},
    {"topic_name": "t", "replicas_assignments": [{"partition_id": 0, "broker_ids": [2 ** 40]}]},
])
def test_wrong_types_and_out_of_range_numbers_are_400(body: dict[str, Any]) -> None:
    with pytest.raises(RestError) as e:
        parse_create_topic(body)
    assert (e.value.status, e.value.error_code) == (400, 400)


def test_a_good_body() -> None:
    topic, validate_only = parse_create_topic(
        {"topic_name": "t", "partitions_count": 3, "replication_factor": 1,
         "configs": [{"name": "cleanup.policy", "value": "compact"}], "validate_only": True})
    assert (topic.name, topic.num_partitions, topic.replication_factor, validate_only) == ("t", 3, 1, True)
    assert topic.config == {"cleanup.policy": "compact"}
