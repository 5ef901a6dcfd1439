"""The sans-io protocol and the log are type-checked (STYLE.md habit 13): a type error in
either fails the suite, as a failing test would."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_mypy_clean_on_protocol_and_log():
    r = subprocess.run([sys.executable, "-m", "mypy", "clients/protocol", "broker/log"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
