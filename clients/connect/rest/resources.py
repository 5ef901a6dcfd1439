"""Kafka Connect's `/connectors` and `/connector-plugins` routes (Kafka's ConnectorsResource
and ConnectorPluginsResource): each handler reads the request, calls one `Herder` method and
answers with Kafka's status code and body.

Handlers raise the herder's errors unchanged; the server's middleware turns them into
`{"error_code", "message"}` answers and forwards `NotLeaderError` to the leader. A handler
reads its body before calling the herder, so the body is cached for forwarding.
"""
from __future__ import annotations

import logging

from aiohttp import web

from clients.connect.errors import BadRequestError, NotFoundError
from clients.connect.rest.bodies import (check_and_put_name, config_map, config_patch,
                                         create_request, empty_response, json_response,
                                         offsets_request, query_bool, read_json)
from clients.connect.runtime.herder import Herder

__all__ = ["ConnectorsResource", "ConnectorPluginsResource"]

log = logging.getLogger(__name__)


def _name(request: web.Request) -> str:
    return request.match_info["name"]


def _task(request: web.Request) -> int:
    return int(request.match_info["task"])      # the route admits digits only


def _location(request: web.Request, name: str) -> dict[str, str]:
    # JAX-RS makes Response.created's relative URI absolute against the request's base URI.
    return {"Location": str(request.url.origin().with_path("/connectors/" + name))}


class ConnectorsResource:
    """`/connectors/...`; stateless apart from the herder, so safe for concurrent requests."""

    def __init__(self, herder: Herder):
        self.herder = herder

    def routes(self) -> list[web.RouteDef]:
        c = "/connectors/{name}"
        task = c + r"/tasks/{task:\d+}"
        return [
            web.get("/connectors", self.list_connectors),
            web.get("/connectors/", self.list_connectors),
            web.post("/connectors", self.create_connector),
            web.post("/connectors/", self.create_connector),
            web.get(c, self.get_connector),
            web.delete(c, self.destroy_connector),
            web.get(c + "/config", self.get_connector_config),
            web.put(c + "/config", self.put_connector_config),
            web.patch(c + "/config", self.patch_connector_config),
            web.get(c + "/status", self.get_connector_status),
            web.get(c + "/tasks", self.get_task_configs),
            web.get(task + "/status", self.get_task_status),
            web.post(task + "/restart", self.restart_task),
            web.post(c + "/restart", self.restart_connector),
            web.put(c + "/pause", self.pause_connector),
            web.put(c + "/resume", self.resume_connector),
            web.put(c + "/stop", self.stop_connector),
            web.get(c + "/topics", self.get_active_topics),
            web.put(c + "/topics/reset", self.reset_active_topics),
            web.get(c + "/offsets", self.get_offsets),
            web.patch(c + "/offsets", self.alter_offsets),
            web.delete(c + "/offsets", self.reset_offsets),
        ]

    async def list_connectors(self, request: web.Request) -> web.Response:
        """The names; with `?expand=status` / `?expand=info` (repeatable) a map name ->
        {"status": ..., "info": ...}. A connector deleted meanwhile is left out."""
        names = await self.herder.connectors()
        if "expand" not in request.query:
            return json_response(names)
        expansions = request.query.getall("expand")
        out: dict[str, dict[str, object]] = {}
        for name in names:
            try:
                entry: dict[str, object] = {}
                for expansion in expansions:
                    if expansion == "status":
                        entry["status"] = await self.herder.connector_status(name)
                    elif expansion == "info":
                        entry["info"] = await self.herder.connector_info(name)
                    else:
                        log.info("Ignoring unknown expansion type %s", expansion)
                out[name] = entry
            except NotFoundError:
                log.debug("Unable to get connector info for %s on this worker", name)
        return json_response(out)

    async def create_connector(self, request: web.Request) -> web.Response:
        name, config, initial_state = create_request(await read_json(request))
        _created, info = await self.herder.put_connector_config(name, config, False, initial_state)
        return json_response(info, 201, _location(request, name))

    async def get_connector(self, request: web.Request) -> web.Response:
        return json_response(await self.herder.connector_info(_name(request)))

    async def destroy_connector(self, request: web.Request) -> web.Response:
        await self.herder.delete_connector(_name(request))
        return empty_response(204)

    async def get_connector_config(self, request: web.Request) -> web.Response:
        return json_response(await self.herder.connector_config(_name(request)))

    async def put_connector_config(self, request: web.Request) -> web.Response:
        """201 with a Location when the connector was created, 200 when reconfigured."""
        name = _name(request)
        config = config_map(await read_json(request))
        check_and_put_name(name, config)
        created, info = await self.herder.put_connector_config(name, config, True)
        if created:
            return json_response(info, 201, _location(request, name))
        return json_response(info)

    async def patch_connector_config(self, request: web.Request) -> web.Response:
        patch = config_patch(await read_json(request))
        return json_response(await self.herder.patch_connector_config(_name(request), patch))

    async def get_connector_status(self, request: web.Request) -> web.Response:
        return json_response(await self.herder.connector_status(_name(request)))

    async def get_task_configs(self, request: web.Request) -> web.Response:
        return json_response(await self.herder.task_configs(_name(request)))

    async def get_task_status(self, request: web.Request) -> web.Response:
        return json_response(await self.herder.task_status(_name(request), _task(request)))

    async def restart_task(self, request: web.Request) -> web.Response:
        await self.herder.restart_task(_name(request), _task(request))
        return empty_response(204)

    async def restart_connector(self, request: web.Request) -> web.Response:
        """`?includeTasks=&onlyFailed=` (both false by default): 204 when only the connector
        was restarted, else 202 with the status of what is restarting."""
        state = await self.herder.restart_connector(
            _name(request), query_bool(request, "includeTasks", False),
            query_bool(request, "onlyFailed", False))
        if state is None:
            return empty_response(204)
        return json_response(state, 202)

    async def pause_connector(self, request: web.Request) -> web.Response:
        await self.herder.pause_connector(_name(request))
        return empty_response(202)

    async def resume_connector(self, request: web.Request) -> web.Response:
        await self.herder.resume_connector(_name(request))
        return empty_response(202)

    async def stop_connector(self, request: web.Request) -> web.Response:
        await self.herder.stop_connector(_name(request))
        return empty_response(204)

    async def get_active_topics(self, request: web.Request) -> web.Response:
        name = _name(request)
        return json_response({name: {"topics": await self.herder.connector_topics(name)}})

    async def reset_active_topics(self, request: web.Request) -> web.Response:
        await self.herder.reset_connector_topics(_name(request))
        return empty_response(202)      # Kafka answers Response.accepted()

    async def get_offsets(self, request: web.Request) -> web.Response:
        return json_response(await self.herder.connector_offsets(_name(request)))

    async def alter_offsets(self, request: web.Request) -> web.Response:
        offsets = offsets_request(await read_json(request))
        message = await self.herder.alter_connector_offsets(_name(request), offsets)
        return json_response({"message": message})

    async def reset_offsets(self, request: web.Request) -> web.Response:
        return json_response({"message": await self.herder.reset_connector_offsets(_name(request))})


def _normalized_plugin_name(name: str) -> str:
    # Works for both full and simple class names; for the latter it gives the alias.
    suffix = "Connector"
    return name[:-len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else name


class ConnectorPluginsResource:
    """`/connector-plugins/...`: the installed plugins, their config definitions (KIP-769)
    and config validation."""

    def __init__(self, herder: Herder):
        self.herder = herder

    def routes(self) -> list[web.RouteDef]:
        p = "/connector-plugins/{plugin}"
        return [
            web.get("/connector-plugins", self.list_plugins),
            web.get("/connector-plugins/", self.list_plugins),
            web.get(p + "/config", self.get_plugin_config),
            web.put(p + "/config/validate", self.validate_configs),
        ]

    async def list_plugins(self, request: web.Request) -> web.Response:
        """`?connectorsOnly=` (default true): only source and sink connectors."""
        return json_response(self.herder.connector_plugins(query_bool(request, "connectorsOnly", True)))

    async def get_plugin_config(self, request: web.Request) -> web.Response:
        return json_response(self.herder.plugin_config(request.match_info["plugin"]))

    async def validate_configs(self, request: web.Request) -> web.Response:
        """ConfigInfos, 200 even when it counts errors. A "connector.class" in the body must
        name the plugin of the path (full name, simple name or alias)."""
        plugin = request.match_info["plugin"]
        config = config_map(await read_json(request))
        included = config.get("connector.class")
        if included is not None and not _normalized_plugin_name(included).endswith(
                _normalized_plugin_name(plugin)):
            raise BadRequestError(f"Included connector type {included} does not match request type {plugin}")
        return json_response(await self.herder.validate_connector_config(plugin, config))
