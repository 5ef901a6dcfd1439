"""Kafka Connect's REST bodies: reading requests' JSON and query parameters, writing answers.

Every function here either returns the value in the shape the herder expects or raises
`BadRequestError` (400) with a message for the client; none lets a `ValueError` or a
`KeyError` escape as a 500. Scalars in a config map are turned into strings as Kafka's
Jackson does for a `Map<String, String>` (`1` -> "1", `true` -> "true").
"""
from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from clients.connect.errors import BadRequestError

__all__ = ["read_json", "config_map", "config_patch", "create_request", "offsets_request",
           "query_bool", "check_and_put_name", "INITIAL_STATES", "json_response", "empty_response",
           "error_response"]

# KIP-980: the states a connector may be created in.
INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")


async def read_json(request: web.Request) -> Any:
    """The request's body as JSON. An empty or malformed body is a 400; a body over the
    application's `client_max_size` raises aiohttp's 413, answered as JSON by the server."""
    raw = await request.read()
    if not raw.strip():
        raise BadRequestError("Request body is empty; a JSON document is required")
    try:
        return json.loads(raw)
    except ValueError as e:     # json.JSONDecodeError and UnicodeDecodeError
        raise BadRequestError(f"Request body is not valid JSON: {e}") from None


def _string(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    raise BadRequestError(f"{what} must be a string, not {_json_kind(value)}")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def config_map(value: Any, what: str = "Connector configuration") -> dict[str, str]:
    """A JSON object of string values (a connector's config, a plugin config to validate)."""
    if not isinstance(value, dict):
        raise BadRequestError(f"{what} must be a JSON object, not {_json_kind(value)}")
    return {k: _string(v, f"The value of '{k}'") for k, v in value.items()}


def config_patch(value: Any) -> dict[str, str | None]:
    """KIP-477's patch: like `config_map`, but null stands for "remove this key"."""
    if not isinstance(value, dict):
        raise BadRequestError(f"Connector configuration patch must be a JSON object, not {_json_kind(value)}")
    return {k: None if v is None else _string(v, f"The value of '{k}'") for k, v in value.items()}


def create_request(value: Any) -> tuple[str, dict[str, str], str | None]:
    """`POST /connectors`'s body {"name", "config", "initial_state"?} as (name, config,
    initial state upper-cased). The name is trimmed as Kafka does; the config's own "name",
    when present, must equal it, and is filled in when absent."""
    if not isinstance(value, dict):
        raise BadRequestError(f"Request body must be a JSON object, not {_json_kind(value)}")
    name = value.get("name")
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise BadRequestError(f"Connector name must be a string, not {_json_kind(name)}")
    name = name.strip()
    if not name:
        raise BadRequestError('Connector name is missing or empty: the body needs a non-empty "name"')
    if "config" not in value:
        raise BadRequestError('Request body has no "config" object')
    config = config_map(value["config"])
    check_and_put_name(name, config)
    state = value.get("initial_state")
    if state is not None:
        if not isinstance(state, str) or state.upper() not in INITIAL_STATES:
            raise BadRequestError(f"Invalid initial_state {json.dumps(state)}: "
                                  f"expected one of {', '.join(INITIAL_STATES)}")
        state = state.upper()
    return name, config, state


def check_and_put_name(name: str, config: dict[str, str]) -> None:
    """Kafka's checkAndPutConnectorConfigName: a "name" in the config must match `name`."""
    included = config.get("name")
    if included is None:
        config["name"] = name
    elif included != name:
        raise BadRequestError(f"Connector name configuration ({included}) doesn't match "
                              f"connector name in the URL ({name})")


def offsets_request(value: Any) -> list[dict[str, Any]]:
    """KIP-875's `PATCH .../offsets` body {"offsets": [{"partition": {...}, "offset": {...}|null}]}."""
    if not isinstance(value, dict):
        raise BadRequestError(f"Request body must be a JSON object, not {_json_kind(value)}")
    offsets = value.get("offsets")
    if not offsets:
        raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
    if not isinstance(offsets, list):
        raise BadRequestError(f'"offsets" must be an array, not {_json_kind(offsets)}')
    for entry in offsets:
        if not isinstance(entry, dict) or not isinstance(entry.get("partition"), dict):
            raise BadRequestError('Each element of "offsets" must be an object with a "partition" object')
        if entry.get("offset") is not None and not isinstance(entry["offset"], dict):
            raise BadRequestError(f'An "offset" must be an object or null, not {_json_kind(entry["offset"])}')
    return [{"partition": e["partition"], "offset": e.get("offset")} for e in offsets]


def query_bool(request: web.Request, name: str, default: bool) -> bool:
    """A boolean query parameter as JAX-RS reads one: "true" in any case is true, any other
    value false, absent the default."""
    value = request.query.get(name)
    return default if value is None else value.lower() == "true"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer, as every route of the REST API gives."""
    return web.Response(text=json.dumps(body), status=status, headers=headers,
                        content_type="application/json")


def empty_response(status: int) -> web.Response:
    """An answer without a body (202, 204), still typed application/json as Kafka's are."""
    return web.Response(status=status, content_type="application/json")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """Kafka Connect's ErrorMessage: {"error_code": <http status>, "message": ...}."""
    return json_response({"error_code": status, "message": message}, status, headers)
