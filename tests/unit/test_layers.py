"""The layers hold (docs/ARCHITECTURE.md): import-linter checks the contracts declared in
pyproject.toml, and one check import-linter cannot make: no module imports a private name
(a leading underscore) from another top-level package."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "zkcoord", "clients", "spark_jobs")


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def private_imports_across_packages() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                if node.module.split(".")[0] == package:
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_no_package_imports_another_packages_private_names():
    assert private_imports_across_packages() == []
