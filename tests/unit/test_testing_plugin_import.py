"""The pytest plugin is loaded by every pytest run where strom is installed (a pytest11 entry
point), this project's own suite included: importing it must not import the broker, the
clients or kazoo (about a second of CPU); its fixtures import those when a test uses them."""
from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("broker.main", "broker.testing.cluster", "clients", "zkcoord", "kazoo", "asyncio",
         "confluent_kafka")


def test_importing_the_plugin_imports_nothing_heavy():
    code = ("import sys; before = set(sys.modules); import broker.testing.pytest_plugin; "
            "import json; print(json.dumps(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert "broker.testing.pytest_plugin" in loaded
    heavy = [m for m in loaded if m.startswith(HEAVY)]
    assert heavy == [], f"the plugin's import pulled in {heavy}"
