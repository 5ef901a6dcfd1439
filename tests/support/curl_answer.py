"""An HTTP answer as `curl -s -i` prints it, for the tests that walk REST APIs with curl."""
from __future__ import annotations

import json
from typing import Any


class Answer:
    """Status, headers (names lower-cased), the body's text and, when there is one, its
    parsed JSON (`body`, None for an empty body)."""

    def __init__(self, raw: bytes):
        head, _, payload = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {k.strip().lower(): v.strip()
                        for k, _, v in (line.partition(":") for line in lines)}
        self.text = payload.decode()
        self.body: Any = json.loads(payload) if payload.strip() else None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0]

    def __repr__(self) -> str:
        return f"<{self.status} {self.text[:300]}>"
