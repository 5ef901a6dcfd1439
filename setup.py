"""Compiles clients/protocol/record_rows.py with mypyc where it can (everything else is in
pyproject.toml). Optional: without mypy in the build environment or a C compiler, strom
installs as pure Python and imports the module's source (clients/protocol/native.py).
STROM_PURE_PYTHON=1 at install time skips the compilation."""
import os

from setuptools import setup

COMPILED = ["clients/protocol/record_rows.py"]


def compiled_extensions() -> list:
    if os.environ.get("STROM_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as e:
        print(f"strom: mypyc is not available ({e}); installing without compiled modules")
        return []
    try:
        # Only the module itself is type-checked: what it imports is Any to mypyc (the rest
        # of the tree imports packages the isolated build environment does not have).
        # Its own cache: the tree's .mypy_cache is the type check's (tests/unit/test_typecheck.py),
        # and entries written from the build environment's view of the imports must not reach it.
        extensions = mypycify(["--follow-imports=skip", "--cache-dir=build/mypyc-cache", *COMPILED],
                              opt_level="3")
    except (Exception, SystemExit) as e:     # mypyc refused the module (a type error)
        print(f"strom: mypyc could not compile {COMPILED} ({e}); installing without them")
        return []
    for ext in extensions:
        ext.optional = True     # no C compiler: a warning and the pure-Python module
    return extensions


setup(ext_modules=compiled_extensions())
