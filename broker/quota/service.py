"""The broker's client quotas: the configs the metadata store keeps, put in force in the
quota managers whenever they change, and the logic of DescribeClientQuotas and
AlterClientQuotas over them (Kafka's ZkAdminManager.describeClientQuotas/alterClientQuotas).

Runs on the event loop; the store calls `reload` on it after its cache changed.
"""
from __future__ import annotations

import logging
from typing import Callable, Mapping, Protocol

from .entities import QUOTA_KEYS, QuotaEntity, check_entity, check_value
from .manager import ClientQuotaManagers, QuotaSettings

log = logging.getLogger("strom.quota")

__all__ = ["QuotaConfigStore", "ClientQuotas", "ComponentFilter", "MATCH_EXACT", "MATCH_DEFAULT",
           "MATCH_SPECIFIED"]

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# (entity type, match type, match) of a DescribeClientQuotas filter.
ComponentFilter = tuple[str, int, "str | None"]


class QuotaConfigStore(Protocol):
    """Where quota configs live: zkcoord.zk_quotas.ZkQuotas, or the standalone store."""

    def client_quota_configs(self) -> Mapping[QuotaEntity, Mapping[str, str]]: ...

    def subscribe_client_quotas(self, callback: Callable[[], None]) -> Callable[[], None]: ...

    async def alter_client_quotas(self, entity: QuotaEntity,
                                  changes: Mapping[str, str | None]) -> None: ...


class ClientQuotas:
    """Quota configs and their enforcement on one broker."""

    def __init__(self, store: QuotaConfigStore, settings: QuotaSettings | None = None):
        self.store = store
        self.managers = ClientQuotaManagers(settings)
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        store.subscribe_client_quotas(self.reload)

    def reload(self) -> None:
        """Put in force what the store holds now (its quota keys that parse as numbers)."""
        configs: dict[QuotaEntity, dict[str, float]] = {}
        for e, raw in self.store.client_quota_configs().items():
            values = {}
            for key, text in raw.items():
                if key not in QUOTA_KEYS:
                    continue
                try:
                    values[key] = float(text)
                except ValueError:
                    log.error("ignoring quota %s=%r of %s: not a number", key, text, e)
            if values:
                configs[e] = values
        if configs != self.configs:
            self.configs = configs
            self.managers.configure(configs)

    # ------------------------------------------------------------ DescribeClientQuotas

    def describe(self, components: list[ComponentFilter], strict: bool
                 ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The entities matching the filter with their quota values; ValueError with Kafka's
        reason for a filter it refuses."""
        types = [t for t, _, _ in components]
        if len(set(types)) != len(types):
            raise ValueError(f"Duplicate entity type in filter: {types}")
        for t, match_type, match in components:
            if t not in ("user", "client-id", "ip"):
                raise ValueError(f"Unexpected quota entity type {t!r}")
            if match_type == MATCH_EXACT and match is None:
                raise ValueError(f"Missing match value for entity type {t}")
            if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise ValueError(f"Unknown match type {match_type}")
        out = []
        for e, values in sorted(self._stored().items(), key=lambda ev: repr(ev[0])):
            names = dict(e)
            if strict and set(names) - set(types):
                continue
            if all(t in names and _matches(names[t], m, match) for t, m, match in components):
                out.append((e, values))
        return out

    def _stored(self) -> dict[QuotaEntity, dict[str, float]]:
        """What the store holds right now (a write just made is seen before its notification)."""
        out = {}
        for e, raw in self.store.client_quota_configs().items():
            values = {}
            for key, text in raw.items():
                try:
                    values[key] = float(text)
                except ValueError:
                    continue
            if values:
                out[e] = values
        return out

    # ------------------------------------------------------------ AlterClientQuotas

    @staticmethod
    def check_alteration(entity: list[tuple[str, str | None]],
                         ops: list[tuple[str, float, bool]]) -> tuple[QuotaEntity, dict[str, str | None]]:
        """The entity and the changes to store (None: remove); ValueError with Kafka's reason."""
        e = check_entity(entity)
        changes: dict[str, str | None] = {}
        for key, value, remove in ops:
            if key in changes:
                raise ValueError(f"Duplicate quota key {key} not updating quota for {e}")
            changes[key] = None if remove else check_value(key, value)
            if remove:
                check_value(key, 1.0)       # an unknown key is refused even when removed
        return e, changes

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, str | None]) -> None:
        await self.store.alter_client_quotas(entity, changes)
        self.reload()


def _matches(name: str | None, match_type: int, match: str | None) -> bool:
    if match_type == MATCH_EXACT:
        return name == match
    if match_type == MATCH_DEFAULT:
        return name is None
    return name is not None
