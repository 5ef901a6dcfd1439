"""/metrics.json: the same families and samples as /metrics, as JSON (like a Jolokia read).

    {"broker_id": 0, "timestamp_ms": 1700000000000,
     "metrics": {"kafka_server_brokertopicmetrics_messagesin":
                     {"type": "counter", "help": "...",
                      "samples": [{"name": "kafka_server_brokertopicmetrics_messagesin_total",
                                   "labels": {"topic": "t"}, "value": 42}, ...]}, ...}}

Values that JSON cannot carry (NaN, +/-Inf) become the strings "NaN", "+Inf", "-Inf", as
the Prometheus text format writes them. Integral floats are written as integers.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable

from prometheus_client.core import Metric


def json_value(v: float) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def families_to_dict(families: Iterable[Metric], name_prefixes: list[str] | None = None) -> dict[str, Any]:
    """Family name -> type, help and samples; `name_prefixes` keeps only families whose name
    starts with one of them (Jolokia's read of a pattern)."""
    out: dict[str, Any] = {}
    for f in families:
        if name_prefixes and not any(f.name.startswith(p) for p in name_prefixes):
            continue
        entry = out.setdefault(f.name, {"type": f.type, "help": f.documentation, "samples": []})
        entry["samples"].extend(
            {"name": s.name, "labels": dict(s.labels), "value": json_value(s.value)} for s in f.samples)
    return out


def render_json(families: Iterable[Metric], *, broker_id: int, timestamp_ms: int,
                name_prefixes: list[str] | None = None) -> bytes:
    doc = {"broker_id": broker_id, "timestamp_ms": timestamp_ms,
           "metrics": families_to_dict(families, name_prefixes)}
    return json.dumps(doc, separators=(",", ":")).encode()


def sample_value(doc: dict[str, Any], family: str, labels: dict[str, str] | None = None,
                 sample: str | None = None, default: Any = None) -> Any:
    """The value of the first sample of `family` (in a /metrics.json document) whose labels
    include `labels` and whose name is `sample` (default: the family's main sample: name,
    or name_total for counters)."""
    f = doc.get("metrics", doc).get(family)
    if f is None:
        return default
    want = sample or (family + "_total" if f["type"] == "counter" else family)
    for s in f["samples"]:
        if s["name"] == want and all(s["labels"].get(k) == v for k, v in (labels or {}).items()) \
                and (labels is not None or not s["labels"] or sample is not None):
            return s["value"]
    return default
