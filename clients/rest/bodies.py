"""Reading requests and writing answers the way Confluent's REST Proxy (JAX-RS on Jetty) does.

Content types: v3 speaks `application/json`; v2 speaks Confluent's vendor types
`application/vnd.kafka[.<embedded>].v2+json` (embedded format `json` or `binary`), with
`application/vnd.kafka+json` and `application/json` accepted where no embedded format is
involved. A request whose `Content-Type` a route does not consume is 415, one whose
`Accept` no type the route produces satisfies is 406, as JAX-RS answers. A body that is not
JSON is 400 (rest-utils' JsonParseExceptionMapper), and so is one of the wrong shape
(its JsonMappingExceptionMapper); 422 is for values that break a rule.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from aiohttp import web

from clients.rest.errors import RestError, bad_request

__all__ = ["json_response", "error_response", "read_json", "parse_json", "require_content_type", "negotiate",
           "media_type", "V2", "V2_JSON", "V2_BINARY", "V2_GENERIC", "JSON", "V2_METADATA_TYPES",
           "UNSUPPORTED_MEDIA_TYPE", "NOT_ACCEPTABLE"]

JSON = "application/json"
V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"
V2_GENERIC = "application/vnd.kafka+json"
# What v2's metadata, subscription, assignment, position and offset routes consume and produce.
V2_METADATA_TYPES = (V2, V2_GENERIC, JSON)

UNSUPPORTED_MEDIA_TYPE = "HTTP 415 Unsupported Media Type"
NOT_ACCEPTABLE = "HTTP 406 Not Acceptable"


def json_response(body: Any, status: int = 200, content_type: str = JSON,
                  headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=status,
                        content_type=content_type, headers=headers)


def error_response(status: int, error_code: int, message: str, content_type: str = JSON,
                   headers: dict[str, str] | None = None) -> web.Response:
    return json_response({"error_code": error_code, "message": message}, status, content_type, headers)


def media_type(header: str | None) -> str:
    """The bare media type of a Content-Type/Accept item, lower-cased, parameters dropped."""
    return (header or "").split(";", 1)[0].strip().lower()


def require_content_type(request: web.Request, consumed: Iterable[str]) -> str:
    """The request's media type when the route consumes it, else 415. A request without a
    body type is taken as the route's first type (JAX-RS's default for an absent header)."""
    consumed = tuple(consumed)
    given = media_type(request.headers.get("Content-Type"))
    if not given:
        return consumed[0]
    if given in consumed:
        return given
    raise RestError(415, 415, UNSUPPORTED_MEDIA_TYPE)


def negotiate(request: web.Request, produced: Iterable[str]) -> str:
    """The type to answer with: the first of `produced` the `Accept` header admits (its
    items in order of their q values, `*/*` and `type/*` wildcards), the first of
    `produced` without an Accept header; none admitted is 406."""
    produced = tuple(produced)
    accept = request.headers.get("Accept", "").strip()
    if not accept:
        return produced[0]
    ranked: list[tuple[float, int, str]] = []
    for i, item in enumerate(accept.split(",")):
        kind, *params = item.split(";")
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        kind = kind.strip().lower()
        if kind and q > 0:
            ranked.append((-q, i, kind))
    for _, _, kind in sorted(ranked):
        for offered in produced:
            if kind in ("*/*", "*") or kind == offered or (
                    kind.endswith("/*") and offered.startswith(kind[:-1])):
                return offered
    raise RestError(406, 406, NOT_ACCEPTABLE)


def _no_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity; Jackson (and JSON) does not, and a NaN passed on
    # would be written into Kafka as invalid JSON.
    raise ValueError(f"Non-standard token '{name}'")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def parse_json(raw: bytes | str) -> Any:
    """JSON text as Jackson reads it, else 400: malformed text, NaN/Infinity, bytes that
    are not UTF-8, and nesting too deep to parse (Python's recursion limit; Jackson's
    default limit is 1,000 levels) are all the client's error, never a 500."""
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        return _DECODER.decode(text)
    except RecursionError:
        raise bad_request("The JSON body is nested too deeply") from None
    except ValueError as e:             # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise bad_request(f"Unexpected character in the JSON body: {e}") from None


async def read_json(request: web.Request, *, allow_empty: bool = False) -> Any:
    """The body as JSON (`parse_json`); an empty body is None when `allow_empty`, else 400
    as malformed JSON is (a body over the size limit has already been answered 413 by aiohttp)."""
    raw = await request.read()
    if not raw.strip():
        if allow_empty:
            return None
        raise bad_request("Request body is empty; a JSON document is required")
    return parse_json(raw)
