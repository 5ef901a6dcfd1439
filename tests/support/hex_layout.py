"""Hand-built wire bytes for golden tests: one hex piece per field keeps a layout readable."""
from __future__ import annotations

TS = "0000018bcfe56800"            # 1700000000000 ms
TS2 = "0000018bcfee8fc0"           # 1700000600000 ms


def h(*parts: str) -> bytes:
    """Hex pieces, spaces allowed."""
    return bytes.fromhex("".join(parts).replace(" ", ""))


def s16(text: str) -> str:
    """A classic (int16 length) string, as hex."""
    data = text.encode()
    return len(data).to_bytes(2, "big").hex() + data.hex()


def cs(text: str | None) -> str:
    """A compact (uvarint length + 1) string, as hex (null: 00); lengths here stay below 127."""
    if text is None:
        return "00"
    data = text.encode()
    return bytes([len(data) + 1]).hex() + data.hex()
