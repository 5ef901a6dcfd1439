"""Quota entities and configs as Kafka names them (KIP-55, KIP-546), and which config applies
to a connection: the most specific of Kafka's eight levels.

An entity is a sorted tuple of (entity type, name) pairs, the wire form of DescribeClientQuotas
and AlterClientQuotas: (("user", "alice"),), (("client-id", "app"), ("user", "alice")); a name
of None is the default entity of its type (ZooKeeper's `<default>`).
"""
from __future__ import annotations

from typing import Mapping

__all__ = ["QuotaEntity", "USER", "CLIENT_ID", "IP", "PRODUCER_BYTE_RATE", "CONSUMER_BYTE_RATE",
           "REQUEST_PERCENTAGE", "CONTROLLER_MUTATION_RATE", "QUOTA_KEYS", "entity",
           "check_entity", "check_value", "resolve", "quota_of_tags", "entity_text"]

QuotaEntity = tuple[tuple[str, "str | None"], ...]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# The keys strom enforces, with whether Kafka stores them as whole numbers (LONG) or not.
QUOTA_KEYS: dict[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                               REQUEST_PERCENTAGE: False}


def entity(user: str | None = None, client_id: str | None = None, *,
           default_user: bool = False, default_client: bool = False) -> QuotaEntity:
    """The entity of a user and/or client id (or their defaults)."""
    parts: list[tuple[str, str | None]] = []
    if client_id is not None or default_client:
        parts.append((CLIENT_ID, None if default_client else client_id))
    if user is not None or default_user:
        parts.append((USER, None if default_user else user))
    return tuple(parts)


def check_entity(parts: list[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of a request's (type, name) list, sorted; ValueError with Kafka's reason when
    it is not one strom keeps quotas for."""
    types = [t for t, _ in parts]
    if not parts:
        raise ValueError("Invalid empty client quota entity")
    if len(set(types)) != len(types):
        raise ValueError(f"Duplicate entity type in client quota entity: {types}")
    for t, name in parts:
        if t == IP:
            raise ValueError("IP quotas are not supported by strom")
        if t not in (USER, CLIENT_ID):
            raise ValueError(f"Unexpected quota entity type {t!r}")
        if name == "":
            raise ValueError(f"Empty {t} name in client quota entity (null is the default)")
    return tuple(sorted(parts, key=lambda p: p[0]))


def check_value(key: str, value: float) -> str:
    """The value as ZooKeeper stores it (Kafka: a LONG key as a whole number, a DOUBLE as
    Java prints it); ValueError for an unknown key or a value the key cannot take."""
    if key == CONTROLLER_MUTATION_RATE:
        raise ValueError("controller_mutation_rate is not supported by strom (KIP-599 is not "
                         "enforced)")
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise ValueError(f"Invalid configuration key {key}")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"Invalid value {value} for configuration {key}: must be positive")
    if whole:
        if value != int(value):
            raise ValueError(f"Configuration {key} must be a Long value")
        return str(int(value))
    return repr(float(value))


def entity_text(e: QuotaEntity) -> str:
    """As kafka-configs.sh names an entity: user-principal 'alice', client-id 'app', or
    default user-principal / client-id."""
    out = []
    for t, name in sorted(e, key=lambda p: p[0] != USER):
        kind = "user-principal" if t == USER else t
        out.append(f"{kind} '{name}'" if name is not None else f"the default {kind}")
    return ", ".join(out)


def resolve(configs: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str,
            client_id: str) -> tuple[float | None, str, str]:
    """The quota `key` applying to a connection of `user` (the principal's name) with
    `client_id`, and the (user, client-id) metric tags of the sensor it is measured in:
    connections whose tags are equal share one rate. Kafka's DefaultQuotaCallback, most
    specific first: user+client, user+default client, user, default user+client, default
    user+default client, default user, client, default client. (None, "", client_id) when no
    level sets the key."""
    def get(e: QuotaEntity) -> float | None:
        c = configs.get(e)
        return c.get(key) if c is not None else None

    levels: tuple[tuple[QuotaEntity, str, str], ...] = (
        (((CLIENT_ID, client_id), (USER, user)), user, client_id),
        (((CLIENT_ID, None), (USER, user)), user, client_id),
        (((USER, user),), user, ""),
        (((CLIENT_ID, client_id), (USER, None)), user, client_id),
        (((CLIENT_ID, None), (USER, None)), user, client_id),
        (((USER, None),), user, ""),
        (((CLIENT_ID, client_id),), "", client_id),
        (((CLIENT_ID, None),), "", client_id),
    )
    for e, user_tag, client_tag in levels:
        q = get(e)
        if q is not None:
            return q, user_tag, client_tag
    return None, "", client_id


def quota_of_tags(configs: Mapping[QuotaEntity, Mapping[str, float]], key: str, user_tag: str,
                  client_tag: str) -> float | None:
    """The quota `key` of a sensor's metric tags, once configs changed (Kafka's
    DefaultQuotaCallback.quotaLimit): tags naming both look at the four user-and-client
    levels, a user alone at the user levels, a client id alone at the client levels."""
    if user_tag and client_tag:
        candidates: tuple[QuotaEntity, ...] = (
            ((CLIENT_ID, client_tag), (USER, user_tag)), ((CLIENT_ID, None), (USER, user_tag)),
            ((CLIENT_ID, client_tag), (USER, None)), ((CLIENT_ID, None), (USER, None)))
    elif user_tag:
        candidates = (((USER, user_tag),), ((USER, None),))
    elif client_tag:
        candidates = (((CLIENT_ID, client_tag),), ((CLIENT_ID, None),))
    else:
        return None
    for e in candidates:
        c = configs.get(e)
        if c is not None and key in c:
            return c[key]
    return None
