"""docs/COMPATIBILITY.md's API table is what ApiVersions advertises."""
from __future__ import annotations

import re
from pathlib import Path

import broker.server.handlers  # noqa: F401  (registers the handlers)
from broker.server.dispatch import advertised_versions
from clients.protocol.messages import API_BY_KEY

DOC = Path(__file__).resolve().parents[2] / "docs" / "COMPATIBILITY.md"


def test_compatibility_table_matches_the_registry():
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)-(\d+) \| (\w+) \|$", DOC.read_text(), re.M)
    documented = {(int(k), int(lo), int(hi)) for _, k, lo, hi, _ in rows}
    assert documented == set(advertised_versions())
    for name, k, _, _, flexible in rows:
        api = API_BY_KEY[int(k)]
        assert api.name == name
        assert flexible == (str(api.flexible) if api.flexible is not None else "none")
