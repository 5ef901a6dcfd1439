"""What every v3 admin route shares: the call's clients and cluster id, Confluent's links
and resource names, and Kafka's own error messages.

Confluent's v3 entities carry `metadata.self` (the entity's URL), `metadata.resource_name`
(a CRN, `crn:///kafka=<cluster>/topic=<name>`) and `{"related": URL}` links to their
neighbours. URLs are built from the request's own scheme and Host header, so a client
behind a name or port of its own gets links it can follow.

strom's admin client prefixes the broker's message with the resource it was about
("topic t: Topic 't' already exists."); Confluent answers with Kafka's message alone, so
`kafka_error` strips that prefix (and falls back to Kafka's default text for the code when
the broker sent none) before rest-utils' mapping picks the status and code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import web

from clients.protocol.errors import Code, KafkaError, for_code
from clients.rest.bodies import JSON, json_response, negotiate, read_json, require_content_type
from clients.rest.errors import RestError, from_kafka
from clients.rest.kafka import ClientPool, KafkaClients

__all__ = ["AdminCall", "Links", "begin", "kafka_error", "not_found", "collection",
           "resource_metadata", "json_body", "CLUSTER_CANNOT", "CLUSTER_COULD_NOT"]

# Confluent's managers word a missing cluster two ways: topics, brokers, partitions and
# configs say "cannot", consumer groups and their lags "could not".
CLUSTER_CANNOT = "Cluster {} cannot be found."
CLUSTER_COULD_NOT = "Cluster {} could not be found."

# Kafka's default message of an error (Errors.java), for a broker answer without one.
_DEFAULT_MESSAGES = {
    Code.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    Code.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    Code.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    Code.INVALID_CONFIG: "Configuration is invalid.",
    Code.INVALID_PARTITIONS: "Number of partitions is below 1.",
    Code.INVALID_REPLICATION_FACTOR:
        "Replication factor is below 1 or larger than the number of available brokers.",
    Code.INVALID_TOPIC_EXCEPTION:
        "The request attempted to perform an operation on an invalid topic.",
    Code.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the "
                          "client library or the message was sent to an incompatible broker. "
                          "See the broker logs for more details.",
}


def kafka_error(e: BaseException, resource: str | None = None) -> RestError:
    """rest-utils' answer to a Kafka error about `resource` ("topic t", "group g"; None: a
    topic or partition the message names), with Kafka's message rather than strom's."""
    if isinstance(e, KafkaError):
        message = e.message
        prefix = re.match(r"(topic|partition) [^\s:]+(: |$)", message) if resource is None else None
        if message in (resource, e.name) or (prefix is not None and not prefix.group(2)):
            message = _DEFAULT_MESSAGES.get(e.code, message)
        elif resource is not None and message.startswith(resource + ": "):
            message = message[len(resource) + 2:]
        elif prefix is not None:
            message = message[prefix.end():]
        e = for_code(e.code)(message)
    return from_kafka(e)


def not_found(message: str = "HTTP 404 Not Found") -> RestError:
    """JAX-RS's NotFoundException as rest-utils writes it: the bare status as the code; the
    message is the exception's, "HTTP 404 Not Found" when it has none."""
    return RestError(404, 404, message)


class Links:
    """URLs and CRNs of one cluster's entities, rooted at the request's own base URL."""

    def __init__(self, request: web.Request, cluster_id: str):
        self.base = f"{request.scheme}://{request.host}"
        self.cluster_id = cluster_id

    def url(self, *segments: str | int) -> str:
        """`<base>/v3/clusters/<cluster>/<segments...>`, each segment percent-encoded."""
        # Empty segments are skipped, as Confluent's UrlFactory does.
        path = ["v3", "clusters", self.cluster_id, *(str(s) for s in segments)]
        return self.base + "/" + "/".join(quote(p, safe="") for p in path if p)

    def related(self, *segments: str | int) -> dict[str, str]:
        return {"related": self.url(*segments)}

    def crn(self, *pairs: str | int) -> str:
        """`crn:///kafka=<cluster>/<type>=<id>/...`; a trailing odd item stands alone
        (`lag-summary`)."""
        parts = [f"kafka={self.cluster_id}"]
        items = [str(p) for p in pairs]
        parts += [f"{items[i]}={items[i + 1]}" for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            parts.append(items[-1])
        return "crn:///" + "/".join(parts)


def resource_metadata(self_url: str, resource_name: str) -> dict[str, str]:
    return {"self": self_url, "resource_name": resource_name}


def collection(kind: str, self_url: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    """A Confluent ResourceCollection: one page holding everything (`next` null)."""
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data}


@dataclass
class AdminCall:
    """One request's Kafka clients, its (checked) cluster id and its links."""

    clients: KafkaClients
    cluster_id: str
    links: Links

    def ok(self, body: Any, status: int = 200, headers: dict[str, str] | None = None
           ) -> web.Response:
        return json_response(body, status, JSON, headers)


async def begin(pool: ClientPool, request: web.Request, missing_cluster: str | None
                ) -> AdminCall:
    """Negotiate the answer (406 unless JSON is acceptable), get the principal's clients and
    check the path's cluster id: a wrong one is 404 worded by `missing_cluster` (None: JAX-RS's
    bare "HTTP 404 Not Found", as GET /v3/clusters/{id} answers)."""
    negotiate(request, (JSON,))
    clients = await pool.for_request(request)
    cluster_id = await pool.cluster_id(clients)
    asked = request.match_info.get("cluster_id")
    if asked is not None and asked != cluster_id:
        raise not_found() if missing_cluster is None else not_found(missing_cluster.format(asked))
    return AdminCall(clients, cluster_id, Links(request, cluster_id))


async def json_body(request: web.Request) -> Any:
    """The body of a v3 write: JSON only (415 otherwise, as JAX-RS's @Consumes answers);
    unparseable JSON is 400."""
    require_content_type(request, (JSON,))
    return await read_json(request)
