"""The output files of the processes a test starts."""
from __future__ import annotations

from pathlib import Path


def read_log(path: Path, start: int = 0) -> str:
    """The file's text from byte `start` ('' while it does not exist yet)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
