"""The clients stand alone and the Spark source is one of their users: no module of
`clients` imports the broker, zkcoord or spark_jobs, and spark_jobs imports only the
clients' public API (docs/CLIENTS.md), never an underscore name. Function-level imports
count too, which an import graph of module-level imports alone would miss."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The clients' public modules; everything in clients.protocol is public (sans-io).
PUBLIC = {"clients", "clients.aio", "clients.command_line", "clients.config", "clients.types",
          "clients.serde", "clients.partitioner", "clients.producer", "clients.consumer",
          "clients.admin"}


def _imports(package: str) -> list[tuple[str, str, str | None]]:
    """(file, module, name or None) of every import in `package`, relative ones resolved."""
    out: list[tuple[str, str, str | None]] = []
    for path in sorted((REPO / package).rglob("*.py")):
        rel = path.relative_to(REPO)
        here = ".".join(rel.with_suffix("").parts)
        pkg = here if path.name == "__init__.py" else here.rpartition(".")[0]
        pkg = pkg.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(rel))):
            if isinstance(node, ast.Import):
                out += [(str(rel), a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                out += [(str(rel), base, a.name) for a in node.names]
    return out


def test_clients_import_neither_broker_nor_zkcoord_nor_spark_jobs() -> None:
    bad = [(f, m) for f, m, _ in _imports("clients")
           if m.split(".")[0] in ("broker", "zkcoord", "spark_jobs")]
    assert not bad


def test_spark_jobs_use_the_public_client_api_only() -> None:
    bad = []
    for f, module, name in _imports("spark_jobs"):
        if module.split(".")[0] != "clients":
            continue
        public = module in PUBLIC or module.startswith("clients.protocol.")
        private = any(p.startswith("_") for p in module.split(".")) or (name or "").startswith("_")
        if not public or private:
            bad.append((f, module, name))
    assert not bad, "spark_jobs reaches into the clients: " + repr(bad)
