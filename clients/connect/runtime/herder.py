"""What the REST API asks of a worker: Kafka Connect's Herder, as a typed Protocol.

Two implementations: `StandaloneHerder` (one worker, configs from files and REST, offsets
in a local file) and `DistributedHerder` (a member of the Connect group; configs, offsets
and statuses in compacted topics). Every method may raise the errors of
`clients.connect.errors` (NotFoundError, AlreadyExistsError, BadRequestError,
ConflictError, NotLeaderError for what only the leader may do, RequestTimeoutError).

Bodies are Kafka Connect's JSON, built here so both herders answer alike:
  ConnectorInfo  {"name": n, "config": {...}, "tasks": [{"connector": n, "task": i}],
                  "type": "source" | "sink"}
  status         {"name": n, "connector": {"state": s, "worker_id": w[, "trace": t]},
                  "tasks": [{"id": i, "state": s, "worker_id": w[, "trace": t]}],
                  "type": "source" | "sink"}
"""
from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Herder", "connector_info_json"]


def connector_info_json(name: str, config: dict[str, str], task_count: int,
                        kind: str | None) -> dict[str, Any]:
    return {"name": name, "config": dict(config),
            "tasks": [{"connector": name, "task": i} for i in range(task_count)],
            "type": kind or "unknown"}


class Herder(Protocol):
    """See the module docstring. `kafka_cluster_id` is filled in once the worker started."""

    kafka_cluster_id: str
    worker_id: str              # host:port of this worker's REST listener (rest.advertised.*)

    async def connectors(self) -> list[str]: ...

    async def connector_info(self, name: str) -> dict[str, Any]: ...

    async def connector_config(self, name: str) -> dict[str, str]: ...

    async def put_connector_config(self, name: str, config: dict[str, str],
                                   allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        """Create (allow_replace False: AlreadyExistsError if it exists) or replace a
        connector's config; (created, ConnectorInfo). The config is validated first
        (BadRequestError listing the errors). `initial_state` (KIP-980): RUNNING, PAUSED or
        STOPPED for a new connector."""
        ...

    async def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> dict[str, Any]:
        """KIP-477: merge into the existing config (a None value removes the key)."""
        ...

    async def delete_connector(self, name: str) -> None: ...

    async def connector_status(self, name: str) -> dict[str, Any]: ...

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        """[{"id": {"connector": n, "task": i}, "config": {...}}] (GET .../tasks)."""
        ...

    async def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        """{"id": i, "state": s, "worker_id": w[, "trace": t]}."""
        ...

    async def restart_connector(self, name: str, include_tasks: bool,
                                only_failed: bool) -> dict[str, Any] | None:
        """None when only the connector was restarted (REST answers 204); otherwise the
        status with the instances being restarted in state RESTARTING (REST answers 202)."""
        ...

    async def restart_task(self, name: str, task_id: int) -> None: ...

    async def pause_connector(self, name: str) -> None: ...

    async def resume_connector(self, name: str) -> None: ...

    async def stop_connector(self, name: str) -> None: ...

    async def connector_topics(self, name: str) -> list[str]:
        """KIP-558: the topics the connector's tasks have used since the last reset."""
        ...

    async def reset_connector_topics(self, name: str) -> None: ...

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        """KIP-875: {"offsets": [{"partition": {...}, "offset": {...}}]}; a sink's partition
        is {"kafka_topic": t, "kafka_partition": p}, its offset {"kafka_offset": o}."""
        ...

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """KIP-875: the connector must be STOPPED (else BadRequestError); returns the
        message REST answers with 200."""
        ...

    async def reset_connector_offsets(self, name: str) -> str: ...

    def connector_plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        """[{"class": c, "type": "source"|"sink"|"converter"|..., "version": v}]."""
        ...

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """KIP-769: GET /connector-plugins/{plugin}/config, each key's definition."""
        ...

    async def validate_connector_config(self, plugin: str | None,
                                        config: dict[str, str]) -> dict[str, Any]:
        """Kafka's ConfigInfos: {"name": plugin, "error_count": n, "groups": [...],
        "configs": [{"definition": {...}, "value": {...}}]}."""
        ...
