"""Kafka Connect's `/admin/loggers` (KIP-495) on Python's logging.

Levels are named as log4j names them (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF); Python's
WARNING and CRITICAL are accepted too. TRACE is level 5 and OFF is above CRITICAL, so both
behave as in log4j without registering new level names process-wide. The logger "root" is
Python's root logger. Only the worker scope exists: `?scope=cluster` is applied to this worker.
"""
from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from clients.connect.errors import BadRequestError, NotFoundError
from clients.connect.rest.bodies import json_response, read_json

__all__ = ["LoggingResource", "LEVELS"]

log = logging.getLogger(__name__)

ROOT = "root"
# log4j's levels from the most verbose, with the Python level each stands for.
LEVELS: dict[str, int] = {"ALL": 1, "TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                          "WARN": logging.WARNING, "ERROR": logging.ERROR,
                          "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
_ALIASES = {"WARNING": "WARN", "CRITICAL": "FATAL"}


def level_name(level: int) -> str:
    """The log4j name of a Python level (the nearest one at or below it)."""
    name = "ALL"
    for candidate, value in LEVELS.items():
        if level >= value:
            name = candidate
    return name


def _existing_loggers() -> dict[str, logging.Logger]:
    return {name: lg for name, lg in logging.Logger.manager.loggerDict.items()
            if isinstance(lg, logging.Logger)}


class LoggingResource:
    """Reads and sets logger levels; runs on the event loop, as logging's calls are cheap."""

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin/loggers", self.list_loggers),
            web.get("/admin/loggers/", self.list_loggers),
            web.get("/admin/loggers/{logger}", self.get_logger),
            web.put("/admin/loggers/{logger}", self.set_level),
        ]

    async def list_loggers(self, request: web.Request) -> web.Response:
        """The loggers whose level is set explicitly, and root: {name: {"level": L}}."""
        out: dict[str, Any] = {name: {"level": level_name(lg.level)}
                               for name, lg in _existing_loggers().items() if lg.level}
        out[ROOT] = {"level": level_name(logging.getLogger().level)}
        return json_response(dict(sorted(out.items())))

    async def get_logger(self, request: web.Request) -> web.Response:
        """{"level": L}, the logger's effective level; 404 for a logger never created."""
        name = request.match_info["logger"]
        if name.lower() == ROOT:
            return json_response({"level": level_name(logging.getLogger().level)})
        found = _existing_loggers().get(name)
        if found is None:
            raise NotFoundError(f"Logger {name} not found.")
        return json_response({"level": level_name(found.getEffectiveLevel())})

    async def set_level(self, request: web.Request) -> web.Response:
        """Body {"level": L}: sets the logger and every existing descendant (for root, every
        logger); answers the sorted names changed."""
        name = request.match_info["logger"]
        body = await read_json(request)
        desired = body.get("level") if isinstance(body, dict) else None
        if desired is None:
            raise BadRequestError("Desired 'level' parameter was not specified in request.")
        key = str(desired).upper()
        key = _ALIASES.get(key, key)
        if key not in LEVELS:
            raise NotFoundError(f"invalid log level '{desired}'.")    # Kafka answers 404 here
        if request.query.get("scope", "worker").lower() == "cluster":
            log.warning("Cluster-scoped logger levels are not supported; setting %s on this worker only", name)
        level = LEVELS[key]
        existing = _existing_loggers()
        if name.lower() == ROOT:
            targets = dict(existing)
            targets[ROOT] = logging.getLogger()
        else:
            targets = {n: lg for n, lg in existing.items() if n.startswith(name + ".")}
            targets[name] = logging.getLogger(name)
        for lg in targets.values():
            lg.setLevel(level)
        return json_response(sorted(targets))
