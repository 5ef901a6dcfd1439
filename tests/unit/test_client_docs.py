"""What docs/CLIENTS.md and docs/SPARK.md show of the Python API exists: every import in
their code blocks, every `clients.x.Name` / `spark_jobs.x.Name` they name, and the classes
the CLIENTS.md module table gives each module. The docs cannot drift from the code again."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PACKAGES = ("clients", "spark_jobs")


def _code_blocks(doc: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (DOCS / doc).read_text(), re.M | re.S)


def _imports(doc: str) -> list[tuple[str, str | None]]:
    """(module, name or None for `import module`) of every import of our packages."""
    out: list[tuple[str, str | None]] = []
    for block in _code_blocks(doc):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module:
                out += [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                out += [(a.name, None) for a in node.names]
    return [(m, n) for m, n in out if m.split(".")[0] in PACKAGES]


def _dotted_names(doc: str) -> list[str]:
    """`clients.aio.errors.KafkaConnectionError`-style references in the prose and tables."""
    text = (DOCS / doc).read_text()
    names = re.findall(r"`((?:clients|spark_jobs)(?:\.\w+)+)(?:\(\))?`", text)
    return sorted(set(names))


def _needs_pyspark(module: str) -> None:
    if module.split(".")[0] == "spark_jobs":
        pytest.importorskip("pyspark")


def _resolve(dotted: str) -> Any:
    """The module or attribute a dotted name means (the longest importable module prefix,
    then attributes)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("doc", ["CLIENTS.md", "SPARK.md"])
def test_every_import_in_the_code_blocks_works(doc: str) -> None:
    imports = _imports(doc)
    assert imports, f"{doc} shows no import of {PACKAGES}"
    for module, name in imports:
        _needs_pyspark(module)
        mod = importlib.import_module(module)
        if name is not None:
            assert hasattr(mod, name), f"{doc}: from {module} import {name}"


@pytest.mark.parametrize("doc", ["CLIENTS.md", "SPARK.md"])
def test_every_dotted_name_in_the_text_exists(doc: str) -> None:
    for dotted in _dotted_names(doc):
        _needs_pyspark(dotted)
        assert _resolve(dotted) is not None, f"{doc}: {dotted}"


def test_the_module_table_names_what_each_module_exports() -> None:
    rows = re.findall(r"^\| `(clients[\w.]*)` \| (.*) \|$", (DOCS / "CLIENTS.md").read_text(),
                      re.M)
    assert {m for m, _ in rows} >= {"clients", "clients.aio", "clients.protocol"}
    for module, text in rows:
        mod: ModuleType = importlib.import_module(module)
        for name in re.findall(r"`([A-Z]\w+)`", text):
            assert hasattr(mod, name), f"CLIENTS.md: {module} lists {name}"
            assert name in getattr(mod, "__all__", [name]), f"{module}.__all__ lacks {name}"


def test_the_documented_async_imports() -> None:
    # The imports docs/CLIENTS.md showed and that failed with ImportError.
    from clients.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer, KafkaClient

    assert AsyncProducer.__module__ == "clients.aio.producer"
    assert {AsyncAdminClient.__name__, AsyncConsumer.__name__, KafkaClient.__name__} == {
        "AsyncAdminClient", "AsyncConsumer", "KafkaClient"}
