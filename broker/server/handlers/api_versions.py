"""ApiVersions: answered from the handler registry, so advertised == implemented."""
from __future__ import annotations

from ..dispatch import RequestContext, advertised_versions, handles


@handles("ApiVersions", (0, 3))
def api_versions(services: object, request, ctx: RequestContext) -> dict:
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                     for k, lo, hi in advertised_versions()],
        "throttle_time_ms": 0,
    }
