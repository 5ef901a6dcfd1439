"""A syslog load generator: a deterministic mix of RFC 5424 and RFC 3164 datagrams (every
severity, several apps and hosts, structured data, NILVALUEs, a BOM, bytes that are not
UTF-8) with every K-th datagram malformed, sent over UDP at a fixed rate.

    python -m tests.support.syslog_sender --host 127.0.0.1 --port 5514 --count 10000 \\
        --rate 5000 --malformed-every 50 --seed 1

prints one JSON line at the end: {"sent": N, "malformed": M, "by_format": {...}, "seconds": s}.

Importable: `make_mix` / `make_datagrams` build the datagrams (the same for the same
arguments), `expected_counts` says what a receiver should count, `send_datagrams` paces them
out (token bucket on time.perf_counter, a batch of sends per tick).
"""
from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Sequence

APPS = ("billing", "auth", "web", "db", "cache", "scheduler")
HOSTS = ("web-1", "web-2", "db-1", "cache-1", "10.0.0.7")
LEVELS = ("ERROR", "ERROR", "ERROR", "ERROR", "WARN", "INFO", "INFO", "DEBUG")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
BASE_MS = 1_717_243_200_000      # 2024-06-01T12:00:00Z: fixed, so the bytes are reproducible
STEP_MS = 7                      # each datagram's time is this much after the previous one's

# Datagrams a syslog parser must refuse, with the reason why.
MALFORMED = (
    b"",                                                        # empty
    b"plain text with no PRI",                                  # no PRI
    b"<192>Jun  1 12:00:00 web-1 app: PRI over 191",            # PRI out of range
    b"<1a>Jun  1 12:00:00 web-1 app: PRI not a number",         # bad PRI
    b"<13>1 2024-13-01T00:00:00Z web-1 app - - - month 13",     # bad timestamp
    b"<13>1 2024-06-01T12:00:00 web-1 app - - - no zone",       # bad timestamp
    b"<13>1 - web-1 app",                                       # header cut off
    b"<13>1 - web-1 app 1 - [open sd=\"x\" never closed",       # bad structured data
    b"<13>Feb 30 12:00:00 web-1 app: no such date",             # bad BSD date
)


@dataclass
class Mix:
    """Datagrams and what they should parse into."""

    datagrams: list[bytes] = field(default_factory=list)
    malformed: int = 0
    by_format: Counter[str] = field(default_factory=Counter)     # rfc5424 / rfc3164
    by_level: Counter[str] = field(default_factory=Counter)      # of the well-formed ones

    def counts(self) -> dict[str, object]:
        return {"sent": len(self.datagrams), "malformed": self.malformed,
                "by_format": dict(sorted(self.by_format.items())),
                "by_level": dict(sorted(self.by_level.items()))}


def _rfc5424(rng: random.Random, i: int, pri: int, ts: datetime, host: str, app: str) -> bytes:
    stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    if i % 5 == 0:
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"
    procid = str(rng.randrange(1, 65536)) if i % 3 else "-"
    msgid = rng.choice(("-", "REQ", "AUDIT", "TX"))
    if i % 3 == 0:
        sd = (f'[req@32473 id="{i}" path="/api/v1/items"]'
              f'[origin ip="10.0.{i % 256}.{rng.randrange(256)}" note="quote \\" bracket \\]"]')
    else:
        sd = "-"
    bom = b"\xef\xbb\xbf" if i % 4 == 0 else b""
    head = f"<{pri}>1 {stamp} {host} {app} {procid} {msgid} {sd} ".encode()
    return head + bom + f"request {i} handled in {rng.randrange(1000)} ms".encode()


def _rfc3164(rng: random.Random, i: int, pri: int, ts: datetime, host: str, app: str) -> bytes:
    stamp = f"{MONTHS[ts.month - 1]} {ts.day:2d} {ts.strftime('%H:%M:%S')}"
    tag = f"{app}[{rng.randrange(1, 65536)}]" if i % 2 else app
    body = f"event {i} status={rng.choice(('ok', 'slow', 'failed'))}".encode()
    if i % 7 == 0:
        body += b" latin-1 \xe9t\xe9"      # not UTF-8: replaced, not malformed
    if i % 11 == 0:                         # no HOSTNAME, as some BSD senders write
        return f"<{pri}>{stamp} {tag}: ".encode() + body
    return f"<{pri}>{stamp} {host} {tag}: ".encode() + body


def make_mix(count: int, malformed_every: int = 0, seed: int = 0,
             base_ms: int = BASE_MS) -> Mix:
    """`count` datagrams; every `malformed_every`-th (0: none) is malformed, the others
    alternate RFC 5424 / RFC 3164 (with a seeded choice of severity, facility, app, host)."""
    rng = random.Random(seed)
    mix = Mix()
    for i in range(count):
        if malformed_every > 0 and (i + 1) % malformed_every == 0:
            mix.datagrams.append(MALFORMED[rng.randrange(len(MALFORMED))])
            mix.malformed += 1
            continue
        severity = rng.randrange(8)
        pri = rng.choice((1, 3, 4, 16, 17, 23)) * 8 + severity
        ts = datetime.fromtimestamp((base_ms + i * STEP_MS) / 1000, tz=timezone.utc)
        host, app = rng.choice(HOSTS), rng.choice(APPS)
        if i % 2 == 0:
            mix.datagrams.append(_rfc5424(rng, i, pri, ts, host, app))
            mix.by_format["rfc5424"] += 1
        else:
            mix.datagrams.append(_rfc3164(rng, i, pri, ts, host, app))
            mix.by_format["rfc3164"] += 1
        mix.by_level[LEVELS[severity]] += 1
    return mix


def make_datagrams(count: int, malformed_every: int = 0, seed: int = 0) -> list[bytes]:
    """The datagrams of make_mix (same arguments, same bytes)."""
    return make_mix(count, malformed_every, seed).datagrams


def expected_counts(count: int, malformed_every: int = 0, seed: int = 0) -> dict[str, object]:
    """{"sent", "malformed", "by_format": {"rfc3164", "rfc5424"}, "by_level": {...}}."""
    return make_mix(count, malformed_every, seed).counts()


def send_datagrams(datagrams: Sequence[bytes], host: str, port: int, rate: float = 0) -> float:
    """Send each datagram once to host:port, at most `rate` a second (0: as fast as the
    socket goes); the seconds it took. A token bucket holding at most 10 ms of tokens paces
    it, so a late tick does not turn into a burst the receiver's buffer cannot take."""
    family, type_, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    n = len(datagrams)
    with socket.socket(family, type_, proto) as sock:
        send = sock.sendto
        start = last = time.perf_counter()
        sent = 0
        if rate <= 0:
            for d in datagrams:
                send(d, addr)
            return time.perf_counter() - start
        burst = max(1.0, rate / 100)
        tokens = 1.0
        while sent < n:
            now = time.perf_counter()
            tokens = min(burst, tokens + (now - last) * rate)
            last = now
            k = min(int(tokens), n - sent)
            if k == 0:
                time.sleep((1 - tokens) / rate)
                continue
            for d in datagrams[sent:sent + k]:
                send(d, addr)
            sent += k
            tokens -= k
        return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="syslog_sender", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5514)
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--rate", type=float, default=10000, help="datagrams a second (0: no limit)")
    parser.add_argument("--malformed-every", type=int, default=0,
                        help="every K-th datagram is malformed (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--now", action="store_true",
                        help="time the messages from now instead of a fixed instant")
    args = parser.parse_args(argv)
    base_ms = int(time.time() * 1000) if args.now else BASE_MS
    mix = make_mix(args.count, args.malformed_every, args.seed, base_ms)
    seconds = send_datagrams(mix.datagrams, args.host, args.port, args.rate)
    print(json.dumps({"sent": len(mix.datagrams), "malformed": mix.malformed,
                      "by_format": dict(sorted(mix.by_format.items())),
                      "seconds": round(seconds, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
