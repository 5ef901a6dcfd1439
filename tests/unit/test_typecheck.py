"""Every package is type-checked (mypy, check_untyped_defs, settings in pyproject.toml): a
type error anywhere in broker/, zkcoord/, clients/ or spark_jobs/ fails the suite, as a
failing test would."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ["broker", "zkcoord", "clients", "spark_jobs"]


def test_mypy_clean_on_every_package():
    r = subprocess.run([sys.executable, "-m", "mypy", *PACKAGES],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
