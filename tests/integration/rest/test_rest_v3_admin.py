"""Confluent's v3 admin API on a live proxy: every route walked by its curl script
(tests/integration/rest/curl/v3_*.sh) and each answer checked field by field against the
entities Confluent documents (kind, metadata.self and resource_name, the "related" links,
the values), plus Confluent's error answers and that the proxy keeps serving after them.

The consumer group routes are checked against a real group: strom's consumer joins it,
commits offsets with a known lag (7 on partition 0, none on partition 1), and the lags,
the summary and the members are read while it is a member and again after it left.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from clients.consumer import Consumer
from clients.producer import Producer
from clients.types import TopicPartition
from tests.support.curl_answer import Answer

CURL = Path(__file__).parent / "curl"
TOPIC, LAG_TOPIC, GROUP = "v3-orders", "v3-lagged", "v3-lag-group"


def run(script: str, *args: object) -> Answer:
    out = subprocess.run([str(CURL / script), *(str(a) for a in args)], capture_output=True,
                         timeout=60, check=True).stdout
    return Answer(out)


def curl(*args: str) -> Answer:
    """A request no script makes (a wrong Content-Type or Accept)."""
    return Answer(subprocess.run(["curl", "-s", "-i", *args], capture_output=True, timeout=60,
                                 check=True).stdout)


def error(answer: Answer, status: int, code: int, message: str) -> None:
    assert (answer.status, answer.body) == (status, {"error_code": code, "message": message})
    assert answer.headers["content-type"].startswith("application/json")


@pytest.fixture(scope="module")
def v3(rest_env: Any) -> Iterator["V3"]:
    yield V3(rest_env.url, rest_env.bootstrap)


class V3:
    """The proxy's URL, the cluster's id (read from GET /v3/clusters) and URL builders."""

    def __init__(self, url: str, bootstrap: str):
        self.url = url
        self.bootstrap = bootstrap
        listed = run("v3_list_clusters.sh", url)
        assert listed.status == 200, listed
        self.cluster = listed.body["data"][0]["cluster_id"]

    def at(self, *segments: object) -> str:
        return "/".join([self.url, "v3", "clusters", self.cluster, *(str(s) for s in segments)])

    def related(self, *segments: object) -> dict[str, str]:
        return {"related": self.at(*segments)}

    def crn(self, tail: str = "") -> str:
        return f"crn:///kafka={self.cluster}" + (f"/{tail}" if tail else "")

    def serving(self) -> None:
        """The proxy still answers after an error."""
        assert run("v3_get_cluster.sh", self.url, self.cluster).status == 200


def cluster_body(v3: V3) -> dict[str, Any]:
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": v3.at(), "resource_name": v3.crn()},
        "cluster_id": v3.cluster,
        "controller": v3.related("brokers", 0),
        "acls": v3.related("acls"),
        "brokers": v3.related("brokers"),
        "broker_configs": v3.related("broker-configs"),
        "consumer_groups": v3.related("consumer-groups"),
        "topics": v3.related("topics"),
        "partition_reassignments": v3.related("topics", "-", "partitions", "-", "reassignment"),
    }


def topic_body(v3: V3, name: str, partitions: int, internal: bool = False) -> dict[str, Any]:
    return {
        "kind": "KafkaTopic",
        "metadata": {"self": v3.at("topics", name), "resource_name": v3.crn(f"topic={name}")},
        "cluster_id": v3.cluster,
        "topic_name": name,
        "is_internal": internal,
        "replication_factor": 1,
        "partitions_count": partitions,
        "partitions": v3.related("topics", name, "partitions"),
        "configs": v3.related("topics", name, "configs"),
        "partition_reassignments": v3.related("topics", name, "partitions", "-", "reassignment"),
    }


def partition_body(v3: V3, topic: str, p: int) -> dict[str, Any]:
    here = ("topics", topic, "partitions", p)
    return {
        "kind": "KafkaPartition",
        "metadata": {"self": v3.at(*here), "resource_name": v3.crn(f"topic={topic}/partition={p}")},
        "cluster_id": v3.cluster,
        "topic_name": topic,
        "partition_id": p,
        "leader": v3.related(*here, "replicas", 0),
        "replicas": v3.related(*here, "replicas"),
        "reassignment": v3.related(*here, "reassignment"),
    }


def config_body(v3: V3, topic: str, name: str, value: str, source: str) -> dict[str, Any]:
    return {
        "kind": "KafkaTopicConfig",
        "metadata": {"self": v3.at("topics", topic, "configs", name),
                     "resource_name": v3.crn(f"topic={topic}/config={name}")},
        "cluster_id": v3.cluster,
        "topic_name": topic,
        "name": name,
        "value": value,
        "is_default": source == "DEFAULT_CONFIG",
        "is_read_only": False,
        "is_sensitive": False,
        "source": source,
        "synonyms": [{"name": name, "value": value, "source": source}],
    }


# ---------------------------------------------------------------------------- clusters, brokers

def test_clusters_and_brokers(v3: V3, rest_env: Any) -> None:
    listed = run("v3_list_clusters.sh", v3.url)
    assert listed.status == 200 and listed.headers["content-type"] == "application/json"
    assert listed.body == {"kind": "KafkaClusterList",
                           "metadata": {"self": f"{v3.url}/v3/clusters", "next": None},
                           "data": [cluster_body(v3)]}
    got = run("v3_get_cluster.sh", v3.url, v3.cluster)
    assert (got.status, got.body) == (200, cluster_body(v3))

    host, port = rest_env.bootstrap.rsplit(":", 1)
    broker = {
        "kind": "KafkaBroker",
        "metadata": {"self": v3.at("brokers", 0), "resource_name": v3.crn("broker=0")},
        "cluster_id": v3.cluster, "broker_id": 0, "host": host, "port": int(port), "rack": None,
        "configs": v3.related("brokers", 0, "configs"),
        "partition_replicas": v3.related("brokers", 0, "partition-replicas"),
    }
    brokers = run("v3_list_brokers.sh", v3.url, v3.cluster)
    assert (brokers.status, brokers.body) == (200, {
        "kind": "KafkaBrokerList", "metadata": {"self": v3.at("brokers"), "next": None},
        "data": [broker]})
    one = run("v3_get_broker.sh", v3.url, v3.cluster, 0)
    assert (one.status, one.body) == (200, broker)

    # Confluent's answers for what is not there: a bare JAX-RS 404 for the cluster and a
    # broker, the manager's message for a cluster under a sub-resource.
    error(run("v3_get_cluster.sh", v3.url, "no-such-cluster"), 404, 404, "HTTP 404 Not Found")
    error(run("v3_list_brokers.sh", v3.url, "no-such-cluster"), 404, 404,
          "Cluster no-such-cluster cannot be found.")
    error(run("v3_get_broker.sh", v3.url, v3.cluster, 7), 404, 404, "HTTP 404 Not Found")
    error(run("v3_get_broker.sh", v3.url, v3.cluster, "x"), 404, 404, "HTTP 404 Not Found")
    error(curl("-H", "Accept: application/vnd.kafka.v2+json", v3.at()), 406, 406,
          "HTTP 406 Not Acceptable")
    v3.serving()


# ---------------------------------------------------------------------------- topics, partitions

def test_topic_lifecycle(v3: V3) -> None:
    created = run("v3_create_topic.sh", v3.url, v3.cluster, json.dumps({
        "topic_name": TOPIC, "partitions_count": 2, "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}]}))
    assert (created.status, created.body) == (201, topic_body(v3, TOPIC, 2))
    assert created.headers["location"] == v3.at("topics", TOPIC)

    got = run("v3_get_topic.sh", v3.url, v3.cluster, TOPIC)
    assert (got.status, got.body) == (200, topic_body(v3, TOPIC, 2))
    listed = run("v3_list_topics.sh", v3.url, v3.cluster)
    assert listed.status == 200
    assert (listed.body["kind"], listed.body["metadata"]) == (
        "KafkaTopicList", {"self": v3.at("topics"), "next": None})
    names = [t["topic_name"] for t in listed.body["data"]]
    assert TOPIC in names and names == sorted(names)
    mine = next(t for t in listed.body["data"] if t["topic_name"] == TOPIC)
    assert mine == topic_body(v3, TOPIC, 2)

    partitions = run("v3_list_partitions.sh", v3.url, v3.cluster, TOPIC)
    assert (partitions.status, partitions.body) == (200, {
        "kind": "KafkaPartitionList",
        "metadata": {"self": v3.at("topics", TOPIC, "partitions"), "next": None},
        "data": [partition_body(v3, TOPIC, 0), partition_body(v3, TOPIC, 1)]})
    one = run("v3_get_partition.sh", v3.url, v3.cluster, TOPIC, 1)
    assert (one.status, one.body) == (200, partition_body(v3, TOPIC, 1))
    error(run("v3_get_partition.sh", v3.url, v3.cluster, TOPIC, 9), 404, 404, "HTTP 404 Not Found")

    # validate_only: the answer a create would give (the broker's default of 3 partitions),
    # and no topic.
    dry = run("v3_create_topic.sh", v3.url, v3.cluster,
              json.dumps({"topic_name": "v3-dry-run", "validate_only": True}))
    assert (dry.status, dry.body) == (201, topic_body(v3, "v3-dry-run", 3))
    unknown = "This server does not host this topic-partition."
    error(run("v3_get_topic.sh", v3.url, v3.cluster, "v3-dry-run"), 404, 40403, unknown)

    # Errors, each followed by a request that still works.
    error(run("v3_create_topic.sh", v3.url, v3.cluster, json.dumps({"topic_name": TOPIC})),
          400, 40002, f"Topic '{TOPIC}' already exists.")
    bad_json = run("v3_create_topic.sh", v3.url, v3.cluster, '{"topic_name": ')
    assert (bad_json.status, bad_json.body["error_code"]) == (400, 400)
    error(run("v3_create_topic.sh", v3.url, v3.cluster, json.dumps({"partitions_count": 1})),
          400, 400, "Missing required properties: topicName")
    error(run("v3_create_topic.sh", v3.url, v3.cluster,
              json.dumps({"topic_name": "x", "partitions_count": "many"})),
          400, 400, "partitions_count must be an integer")
    error(curl("-X", "POST", "-H", "Content-Type: text/plain", "--data", "{}", v3.at("topics")),
          415, 415, "HTTP 415 Unsupported Media Type")
    error(run("v3_create_topic.sh", v3.url, "no-such-cluster"), 404, 404,
          "Cluster no-such-cluster cannot be found.")
    error(run("v3_list_topics.sh", v3.url, "no-such-cluster"), 404, 404,
          "Cluster no-such-cluster cannot be found.")
    error(run("v3_get_topic.sh", v3.url, v3.cluster, "no-such-topic"), 404, 40403, unknown)
    error(run("v3_list_partitions.sh", v3.url, v3.cluster, "no-such-topic"), 404, 40403, unknown)
    v3.serving()

    deleted = run("v3_delete_topic.sh", v3.url, v3.cluster, TOPIC)
    assert (deleted.status, deleted.body) == (204, None)
    error(run("v3_get_topic.sh", v3.url, v3.cluster, TOPIC), 404, 40403, unknown)
    error(run("v3_delete_topic.sh", v3.url, v3.cluster, TOPIC), 404, 40403, unknown)
    v3.serving()


# ---------------------------------------------------------------------------- configs

def test_topic_configs(v3: V3) -> None:
    topic = "v3-configured"
    assert run("v3_create_topic.sh", v3.url, v3.cluster, json.dumps({
        "topic_name": topic, "partitions_count": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}]})).status == 201

    listed = run("v3_list_topic_configs.sh", v3.url, v3.cluster, topic)
    assert listed.status == 200
    assert (listed.body["kind"], listed.body["metadata"]) == (
        "KafkaTopicConfigList", {"self": v3.at("topics", topic, "configs"), "next": None})
    by_name = {c["name"]: c for c in listed.body["data"]}
    assert list(by_name) == sorted(by_name)
    assert by_name["cleanup.policy"] == config_body(v3, topic, "cleanup.policy", "compact",
                                                    "DYNAMIC_TOPIC_CONFIG")
    assert by_name["retention.ms"] == config_body(v3, topic, "retention.ms", "604800000",
                                                  "DEFAULT_CONFIG")

    def config(name: str) -> dict[str, Any]:
        got = run("v3_get_topic_config.sh", v3.url, v3.cluster, topic, name)
        assert got.status == 200, got
        return got.body

    updated = run("v3_update_topic_config.sh", v3.url, v3.cluster, topic, "retention.ms", "3600000")
    assert (updated.status, updated.body) == (204, None)
    assert config("retention.ms") == config_body(v3, topic, "retention.ms", "3600000",
                                                 "DYNAMIC_TOPIC_CONFIG")

    altered = run("v3_alter_topic_configs.sh", v3.url, v3.cluster, topic, json.dumps({"data": [
        {"name": "compression.type", "value": "gzip"},
        {"name": "cleanup.policy", "operation": "DELETE"}]}))
    assert (altered.status, altered.body) == (204, None)
    assert config("compression.type") == config_body(v3, topic, "compression.type", "gzip",
                                                     "DYNAMIC_TOPIC_CONFIG")
    assert config("cleanup.policy") == config_body(v3, topic, "cleanup.policy", "delete",
                                                   "DEFAULT_CONFIG")
    # validate_only changes nothing.
    dry = run("v3_alter_topic_configs.sh", v3.url, v3.cluster, topic, json.dumps(
        {"data": [{"name": "compression.type", "value": "lz4"}], "validate_only": True}))
    assert (dry.status, dry.body) == (204, None)
    assert config("compression.type")["value"] == "gzip"

    reset = run("v3_reset_topic_config.sh", v3.url, v3.cluster, topic, "retention.ms")
    assert (reset.status, reset.body) == (204, None)
    assert config("retention.ms") == config_body(v3, topic, "retention.ms", "604800000",
                                                 "DEFAULT_CONFIG")

    missing = f"Config no.such.config cannot be found for TOPIC {topic} in cluster {v3.cluster}."
    error(run("v3_get_topic_config.sh", v3.url, v3.cluster, topic, "no.such.config"),
          404, 404, "HTTP 404 Not Found")
    error(run("v3_update_topic_config.sh", v3.url, v3.cluster, topic, "no.such.config", "1"),
          404, 404, missing)
    error(run("v3_reset_topic_config.sh", v3.url, v3.cluster, topic, "no.such.config"),
          404, 404, missing)
    error(run("v3_alter_topic_configs.sh", v3.url, v3.cluster, topic, json.dumps(
        {"data": [{"name": "no.such.config", "value": "1"}]})), 404, 404, missing)
    error(run("v3_update_topic_config.sh", v3.url, v3.cluster, topic, "retention.ms", "soon"),
          400, 40002, "Invalid value soon for configuration retention.ms: 'soon' is not an integer")
    error(run("v3_alter_topic_configs.sh", v3.url, v3.cluster, topic, json.dumps(
        {"data": [{"name": "retention.ms", "operation": "RESET"}]})), 400, 400,
          'Cannot deserialize value of type `AlterOperation` from String "RESET": not one of the '
          'values accepted for Enum class: [SET, DELETE]')
    error(run("v3_alter_topic_configs.sh", v3.url, v3.cluster, topic, '{"data": ['), 400, 400,
          "Unexpected character in the JSON body: Expecting value: line 1 column 11 (char 10)")
    error(run("v3_list_topic_configs.sh", v3.url, v3.cluster, "no-such-topic"), 404, 40403,
          "Topic 'no-such-topic' does not exist.")
    error(run("v3_list_topic_configs.sh", v3.url, "no-such-cluster", topic), 404, 404,
          "Cluster no-such-cluster cannot be found.")
    error(curl("-X", "PUT", "-H", "Content-Type: text/plain", "--data", '{"value":"1"}',
               v3.at("topics", topic, "configs", "retention.ms")),
          415, 415, "HTTP 415 Unsupported Media Type")
    v3.serving()


# ---------------------------------------------------------------------------- consumer groups

@pytest.fixture(scope="module")
def lagging_group(v3: V3) -> Iterator[Consumer]:
    """A member of GROUP on LAG_TOPIC: 10 records in partition 0 and 4 in partition 1,
    committed at 3 and 4 (lags 7 and 0)."""
    assert run("v3_create_topic.sh", v3.url, v3.cluster, json.dumps(
        {"topic_name": LAG_TOPIC, "partitions_count": 2})).status == 201
    producer = Producer(bootstrap_servers=v3.bootstrap)
    for i in range(14):
        producer.send(LAG_TOPIC, b"r%d" % i, partition=0 if i < 10 else 1)
    producer.flush()
    producer.close()
    consumer = Consumer(LAG_TOPIC, bootstrap_servers=v3.bootstrap, group_id=GROUP,
                        client_id="v3-lag-client", enable_auto_commit=False)
    deadline = time.monotonic() + 20
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert len(consumer.assignment()) == 2
    consumer.commit({TopicPartition(LAG_TOPIC, 0): 3, TopicPartition(LAG_TOPIC, 1): 4})
    yield consumer
    consumer.close()


def group_body(v3: V3, state: str, assignor: str) -> dict[str, Any]:
    return {
        "kind": "KafkaConsumerGroup",
        "metadata": {"self": v3.at("consumer-groups", GROUP),
                     "resource_name": v3.crn(f"consumer-group={GROUP}")},
        "cluster_id": v3.cluster,
        "consumer_group_id": GROUP,
        "is_simple": False,
        "partition_assignor": assignor,
        "state": state,
        "coordinator": v3.related("brokers", 0),
        "consumers": v3.related("consumer-groups", GROUP, "consumers"),
        "lag_summary": v3.related("consumer-groups", GROUP, "lag-summary"),
    }


def lag_body(v3: V3, p: int, current: int, end: int, member: str, client: str) -> dict[str, Any]:
    return {
        "kind": "KafkaConsumerLag",
        "metadata": {
            "self": v3.at("consumer-groups", GROUP, "lags", LAG_TOPIC, "partitions", p),
            "resource_name": v3.crn(f"consumer-group={GROUP}/lag={LAG_TOPIC}/partition={p}")},
        "cluster_id": v3.cluster,
        "consumer_group_id": GROUP,
        "topic_name": LAG_TOPIC,
        "partition_id": p,
        "current_offset": current,
        "log_end_offset": end,
        "lag": end - current,
        "consumer_id": member,
        "instance_id": None,
        "client_id": client,
    }


def summary_body(v3: V3, member: str, client: str) -> dict[str, Any]:
    return {
        "kind": "KafkaConsumerGroupLagSummary",
        "metadata": {"self": v3.at("consumer-groups", GROUP, "lag-summary"),
                     "resource_name": v3.crn(f"consumer-group={GROUP}/lag-summary")},
        "cluster_id": v3.cluster,
        "consumer_group_id": GROUP,
        "max_lag_consumer_id": member,
        "max_lag_instance_id": None,
        "max_lag_client_id": client,
        "max_lag_topic_name": LAG_TOPIC,
        "max_lag_partition_id": 0,
        "max_lag": 7,
        "total_lag": 7,
        # Confluent's URL builder drops an empty segment: no member, no trailing slash.
        "max_lag_consumer": v3.related("consumer-groups", GROUP, "consumers",
                                       *([member] if member else [])),
        "max_lag_partition": v3.related("topics", LAG_TOPIC, "partitions", 0),
    }


def test_consumer_group_members_and_lags(v3: V3, lagging_group: Consumer) -> None:
    groups = run("v3_list_consumer_groups.sh", v3.url, v3.cluster)
    assert (groups.status, groups.body) == (200, {
        "kind": "KafkaConsumerGroupList",
        "metadata": {"self": v3.at("consumer-groups"), "next": None},
        "data": [group_body(v3, "STABLE", "range")]})
    got = run("v3_get_consumer_group.sh", v3.url, v3.cluster, GROUP)
    assert (got.status, got.body) == (200, group_body(v3, "STABLE", "range"))

    consumers = run("v3_list_consumers.sh", v3.url, v3.cluster, GROUP)
    assert consumers.status == 200 and len(consumers.body["data"]) == 1
    member = consumers.body["data"][0]["consumer_id"]
    assert member.startswith("v3-lag-client-")
    consumer = {
        "kind": "KafkaConsumer",
        "metadata": {"self": v3.at("consumer-groups", GROUP, "consumers", member),
                     "resource_name": v3.crn(f"consumer-group={GROUP}/consumer={member}")},
        "cluster_id": v3.cluster, "consumer_group_id": GROUP, "consumer_id": member,
        "instance_id": None, "client_id": "v3-lag-client",
        "assignments": v3.related("consumer-groups", GROUP, "consumers", member, "assignments"),
    }
    assert consumers.body == {
        "kind": "KafkaConsumerList",
        "metadata": {"self": v3.at("consumer-groups", GROUP, "consumers"), "next": None},
        "data": [consumer]}
    one = run("v3_get_consumer.sh", v3.url, v3.cluster, GROUP, member)
    assert (one.status, one.body) == (200, consumer)

    lags = run("v3_list_lags.sh", v3.url, v3.cluster, GROUP)
    assert (lags.status, lags.body) == (200, {
        "kind": "KafkaConsumerLagList",
        "metadata": {"self": v3.at("consumer-groups", GROUP, "lags"), "next": None},
        "data": [lag_body(v3, 0, 3, 10, member, "v3-lag-client"),      # the largest lag first
                 lag_body(v3, 1, 4, 4, member, "v3-lag-client")]})
    lag = run("v3_get_lag.sh", v3.url, v3.cluster, GROUP, LAG_TOPIC, 0)
    assert (lag.status, lag.body) == (200, lag_body(v3, 0, 3, 10, member, "v3-lag-client"))
    summary = run("v3_get_lag_summary.sh", v3.url, v3.cluster, GROUP)
    assert (summary.status, summary.body) == (200, summary_body(v3, member, "v3-lag-client"))

    error(run("v3_get_consumer.sh", v3.url, v3.cluster, GROUP, "nobody"), 404, 404,
          "HTTP 404 Not Found")
    error(run("v3_get_lag.sh", v3.url, v3.cluster, GROUP, LAG_TOPIC, 5), 404, 404,
          "HTTP 404 Not Found")
    error(run("v3_get_consumer_group.sh", v3.url, v3.cluster, "no-such-group"), 404, 404,
          "HTTP 404 Not Found")
    error(run("v3_list_consumers.sh", v3.url, v3.cluster, "no-such-group"), 404, 404,
          "Consumer Group no-such-group does not exist.")
    for script in ("v3_list_lags.sh", "v3_get_lag_summary.sh"):
        error(run(script, v3.url, v3.cluster, "no-such-group"), 404, 404,
              "Consumer Group no-such-group could not be found.")
    error(run("v3_list_consumer_groups.sh", v3.url, "no-such-cluster"), 404, 404,
          "Cluster no-such-cluster could not be found.")
    v3.serving()

    # Once the member left, the group is Empty and its lags belong to no consumer.
    lagging_group.close()
    left = run("v3_get_consumer_group.sh", v3.url, v3.cluster, GROUP)
    assert (left.status, left.body) == (200, group_body(v3, "EMPTY", ""))
    lags = run("v3_list_lags.sh", v3.url, v3.cluster, GROUP)
    assert lags.body["data"] == [lag_body(v3, 0, 3, 10, "", ""), lag_body(v3, 1, 4, 4, "", "")]
    summary = run("v3_get_lag_summary.sh", v3.url, v3.cluster, GROUP)
    assert summary.body == summary_body(v3, "", "")
    empty = run("v3_list_consumers.sh", v3.url, v3.cluster, GROUP)
    assert (empty.status, empty.body["data"]) == (200, [])


def test_internal_topic_is_readable_but_not_listed(v3: V3, lagging_group: Consumer) -> None:
    """Confluent lists topics as Kafka's listTopics() does, without internal ones; the
    group offsets topic is still there to GET."""
    listed = run("v3_list_topics.sh", v3.url, v3.cluster)
    assert "__consumer_offsets" not in [t["topic_name"] for t in listed.body["data"]]
    got = run("v3_get_topic.sh", v3.url, v3.cluster, "__consumer_offsets")
    assert got.status == 200
    assert got.body["is_internal"] is True and got.body["kind"] == "KafkaTopic"
