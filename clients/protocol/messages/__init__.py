"""Registry of every declared Kafka API, keyed by API key.

Each module in this package declares a family of APIs as data (see `..schema`) and lists
them in its `APIS`; this registry is the one place that gathers them.
"""
from __future__ import annotations

from ..schema import Api
from . import admin, controller, core, group, log_dirs, quotas, sasl

API_BY_KEY: dict[int, Api] = {}
API_BY_NAME: dict[str, Api] = {}
for _module in (core, admin, group, sasl, controller, quotas, log_dirs):
    for _api in _module.APIS:
        assert _api.key not in API_BY_KEY, f"duplicate API key {_api.key}"
        API_BY_KEY[_api.key] = _api
        API_BY_NAME[_api.name] = _api


def api(name_or_key: str | int) -> Api:
    return API_BY_KEY[name_or_key] if isinstance(name_or_key, int) else API_BY_NAME[name_or_key]
