"""Topic requests to one broker over the wire (strom's sans-io codec via `probe.request`): the
fixtures' create_topic / delete_topic / list_topics. Sent this way rather than through
`clients.admin`, whose import and I/O thread cost a test ~0.15 s of CPU before its first topic.
A broker that is not the controller answers NotControllerError (the caller asks another)."""
from __future__ import annotations

from typing import Mapping

from .probe import METADATA_VERSION, request

CREATE_TOPICS_VERSION = 4       # error messages, validate_only; not yet flexible
DELETE_TOPICS_VERSION = 4       # topics by name


def create_topic(port: int, name: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, str], timeout: float) -> None:
    """CreateTopics for one topic (-1 partitions / replication factor: the broker's defaults);
    the error table's exception when the broker refuses (TopicAlreadyExistsError, ...)."""
    from clients.protocol.errors import raise_for_code
    r = request(port, "CreateTopics", CREATE_TOPICS_VERSION, {
        "topics": [{"name": name, "num_partitions": partitions,
                    "replication_factor": replication_factor, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout_ms": int(timeout * 1000), "validate_only": False}, timeout + 5)
    answer = r.topics[0]
    raise_for_code(answer.error_code, f"topic {name}: {answer.error_message or ''}")


def delete_topic(port: int, name: str, timeout: float) -> None:
    """DeleteTopics for one topic; UnknownTopicOrPartitionError when there is none."""
    from clients.protocol.errors import raise_for_code
    r = request(port, "DeleteTopics", DELETE_TOPICS_VERSION,
                {"topic_names": [name], "timeout_ms": int(timeout * 1000)}, timeout + 5)
    answer = r.responses[0]
    raise_for_code(answer.error_code, f"topic {name}: {answer.error_message or ''}")


def topic_names(port: int, timeout: float = 5.0) -> list[str]:
    """The topics the broker knows, internal ones left out, sorted."""
    md = request(port, "Metadata", METADATA_VERSION,
                 {"topics": None, "allow_auto_topic_creation": False}, timeout)
    return sorted(t.name for t in md.topics if t.error_code == 0 and not t.is_internal)
