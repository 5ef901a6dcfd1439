"""Which implementation of a compiled module is imported: the one mypyc built from it when
strom was installed (setup.py, where a C compiler is at hand) or its Python source.

The source is imported instead when STROM_PURE_PYTHON is set to anything but "" or "0" (to
compare the two, or to rule the compiled code out); when the source file is newer than the
compiled one: an edit since the last `pip install -e .` must not be hidden by a stale build
(bin/_setup.sh rebuilds then); and when the build does not load (another interpreter's).
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

__all__ = ["load", "is_compiled", "PURE_ENV"]

PURE_ENV = "STROM_PURE_PYTHON"

log = logging.getLogger(__name__)


def is_compiled(module: ModuleType) -> bool:
    """The module was loaded from a compiled extension, not from its source."""
    return any(str(getattr(module, "__file__", "") or "").endswith(s) for s in EXTENSION_SUFFIXES)


def _pure_wanted() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType:
    """Import module `name` (its package already imported): the compiled build when there is
    one that is not older than the source, else the source."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ImportError(f"no module named {name!r}")
    built = Path(spec.origin)
    if not any(built.name.endswith(s) for s in EXTENSION_SUFFIXES):
        return importlib.import_module(name)        # no build: the source
    source = built.with_name(name.rpartition(".")[2] + ".py")
    if not source.is_file():
        return importlib.import_module(name)
    if not _pure_wanted():
        if source.stat().st_mtime <= built.stat().st_mtime:
            try:
                return importlib.import_module(name)
            except ImportError as e:            # built for another interpreter, say
                sys.modules.pop(name, None)
                log.warning("%s: its compiled build %s does not load (%s); importing the "
                            "source", name, built.name, e)
        else:
            log.warning("%s: %s is newer than its compiled build %s; importing the source "
                        "(pip install -e . compiles it again)", name, source.name, built.name)
    source_spec = importlib.util.spec_from_file_location(name, source)
    assert source_spec is not None and source_spec.loader is not None
    module = importlib.util.module_from_spec(source_spec)
    sys.modules[name] = module
    try:
        source_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
