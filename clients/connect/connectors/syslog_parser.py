"""Sans-io syslog parsing: one UDP datagram (bytes) -> one JSON-able log record (dict).

Two wire formats, told apart by what follows the PRI (`<13>1 ...` is RFC 5424):

- RFC 5424: `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA [MSG]`, each
  header field the NILVALUE "-" when unknown, structured data `[id name="value" ...]...`
  parsed into `{id: {name: value}}` (a name repeated in one element gives a list), a UTF-8
  BOM before MSG dropped.
- RFC 3164 (BSD): `<PRI>Mmm dd hh:mm:ss HOST TAG[pid]: MSG`. The year is not sent: it is
  `now`'s, except that a December message received in January is from last year and a
  January one received in December from next year (a sender's clock slightly ahead). The
  time is read as UTC (the sender's zone is not sent). As rsyslog does, the host may be
  missing (`<PRI>Mmm dd hh:mm:ss TAG: MSG`), the timestamp may be RFC 3339 instead, and a
  message with no timestamp at all (`<PRI>anything`) takes `now` and the sender's address.

The record has the fields spark_jobs/log_levels.py reads (`timestamp` ISO-8601 UTC with
milliseconds and "Z", `level`, `service`, `message`) plus the syslog header; see `parse_syslog`.
Bytes that are not UTF-8 are replaced (U+FFFD), never an error. Input that is not syslog
(no PRI, a PRI over 191, an impossible timestamp, a cut-off RFC 5424 header) raises
`SyslogParseError` with the reason.

Pure functions (the caches below are memos of pure functions): safe from any thread.
"""
from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta, timezone
from typing import Any

__all__ = ["SyslogParseError", "parse_syslog", "parse_syslog_timed", "iso_utc_ms", "FORMATS", "LEVELS",
           "SEVERITY_NAMES", "FACILITY_NAMES", "level_of"]

FORMATS = ("auto", "rfc5424", "rfc3164")
SEVERITY_NAMES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
# rsyslog's facility keywords (12-15 have no keyword in syslog.h).
FACILITY_NAMES = ("kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp",
                  "cron", "authpriv", "ftp", "ntp", "audit", "alert", "clock",
                  "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7")
# Severity -> the level log_levels counts: 0-3 ERROR, 4 WARN, 5-6 INFO, 7 DEBUG.
LEVELS = ("ERROR", "ERROR", "ERROR", "ERROR", "WARN", "INFO", "INFO", "DEBUG")


class SyslogParseError(ValueError):
    """The datagram is not a syslog message; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def level_of(severity: int) -> str:
    """ERROR / WARN / INFO / DEBUG for a syslog severity 0-7."""
    return LEVELS[severity]


# --------------------------------------------------------------------------- grammar

_TS = (r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?(Z|[+-]\d\d:\d\d)")
_TS_RE = re.compile(_TS + r"\Z")
# The whole RFC 5424 header up to the structured data, in one match (the fast path);
# field lengths are the RFC's. A mismatch is diagnosed afterwards by _diagnose_5424.
_H5424 = re.compile(r"<(\d{1,3})>1 (?:-|" + _TS + r") (\S{1,255}) (\S{1,48}) (\S{1,128}) "
                    r"(\S{1,32}) ")
_PRI = re.compile(r"<(\d{1,3})>")
_SD_NAME = r'[^\s="\]]{1,32}'
_SD_VALUE = r'[^"\\]*(?:\\.[^"\\]*)*'    # unrolled: a backslash escapes the next char
_SD_ELEMENT = re.compile(r'\[(' + _SD_NAME + r')((?: ' + _SD_NAME + r'="' + _SD_VALUE
                         + r'")*)\]', re.DOTALL)
_SD_PARAM = re.compile(r' (' + _SD_NAME + r')="(' + _SD_VALUE + r')"', re.DOTALL)
_SD_UNESCAPE = re.compile(r'\\(["\\\]])')

_MONTHS = {m: i + 1 for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))}
# BSD timestamp (day space- or zero-padded, as senders do both), or RFC 3339 as rsyslog takes.
_T3164 = re.compile(r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([ 0-3]?\d) "
                    r"(\d\d):(\d\d):(\d\d)(?: |\Z)|" + _TS + r"(?: |\Z)")
# After the timestamp: either "TAG[pid]: msg" (no host) or "HOST [TAG[pid]: ]msg". A tag
# holds no ':' so an IPv6 host ("fe80::1 su: x") is not taken for one.
_TAG = r"([^\s\[\]:]{1,48})(?:\[([^\]\s]{0,128})\])?:(?: |\Z)"
_B3164 = re.compile(r"(?:" + _TAG + r"|(\S+)(?: (?:" + _TAG + r")?|\Z))?(.*)", re.DOTALL)
_TAG_ONLY = re.compile(_TAG + r"(.*)", re.DOTALL)

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_UTC = timezone.utc
_TRAILER = "\n\r\0"

# Memos of the timestamp conversions: a burst of messages shares a few seconds.
_ts_cache: dict[tuple[Any, ...], tuple[int, str]] = {}
_CACHE_MAX = 4096


def iso_utc_ms(epoch_ms: int) -> str:
    """Epoch ms -> "2024-01-01T00:00:05.123Z" (the form spark_jobs' log_levels reads)."""
    dt = datetime.fromtimestamp(epoch_ms // 1000, tz=_UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def _second(y: int, mo: int, d: int, h: int, mi: int, s: int, offset_s: int) -> tuple[int, str]:
    """(epoch seconds, "YYYY-MM-DDTHH:MM:SS" in UTC) of a local time at a UTC offset;
    SyslogParseError for an impossible date or time."""
    if not 1 <= mo <= 12:
        raise SyslogParseError(f"bad timestamp: no month {mo}")
    if not (h < 24 and mi < 60 and s < 60):
        raise SyslogParseError("bad timestamp: time of day out of range")
    try:
        days = date(y, mo, d).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        raise SyslogParseError("bad timestamp: no such date") from None
    epoch_s = days * 86400 + h * 3600 + mi * 60 + s - offset_s
    if offset_s == 0:
        text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}"
    else:
        text = datetime.fromtimestamp(epoch_s, tz=_UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return epoch_s, text


def _rfc3339(m: re.Match[str], i: int) -> tuple[int, str]:
    """(epoch ms, ISO UTC ms text) from _TS's eight groups, the first being group i of m."""
    frac, off = m.group(i + 6, i + 7)
    key = (m.string[m.start(i):m.end(i + 5)], off)     # "2003-10-11T22:14:15", "Z"
    hit = _ts_cache.get(key)
    if hit is None:
        y, mo, d, h, mi, s = m.group(i, i + 1, i + 2, i + 3, i + 4, i + 5)
        if off == "Z":
            offset_s = 0
        else:
            oh, om = int(off[1:3]), int(off[4:6])
            if oh > 23 or om > 59:
                raise SyslogParseError("bad timestamp: offset out of range")
            offset_s = (oh * 3600 + om * 60) * (-1 if off[0] == "-" else 1)
        hit = _remember(key, _second(int(y), int(mo), int(d), int(h), int(mi), int(s), offset_s))
    ms3 = (frac + "00")[:3] if frac else "000"
    return hit[0] * 1000 + int(ms3), hit[1] + "." + ms3 + "Z"


def _remember(key: tuple[Any, ...], value: tuple[int, str]) -> tuple[int, str]:
    if len(_ts_cache) >= _CACHE_MAX:
        _ts_cache.clear()
    _ts_cache[key] = value
    return value


def _bsd_time(mon: str, day: str, h: str, mi: str, s: str, now: float) -> tuple[int, str]:
    """A BSD timestamp (no year, read as UTC) in the year around `now`."""
    now_tm = time.gmtime(now)
    mo = _MONTHS[mon]
    year = now_tm.tm_year
    if mo == 12 and now_tm.tm_mon == 1:
        year -= 1
    elif mo == 1 and now_tm.tm_mon == 12:
        year += 1
    key = (year, mon, day, h, mi, s)
    hit = _ts_cache.get(key)
    if hit is None:
        hit = _remember(key, _second(year, mo, int(day), int(h), int(mi), int(s), 0))
    return hit[0] * 1000, hit[1] + ".000Z"


def _now(now: float) -> tuple[int, str]:
    ms = int(now * 1000)
    return ms, iso_utc_ms(ms)


def _pri(value: str) -> int:
    pri = int(value)
    if pri > 191:
        raise SyslogParseError(f"bad PRI: {pri} is over 191")
    return pri


# --------------------------------------------------------------------------- parsing

def parse_syslog(data: bytes, now: float | None = None, sender: str | None = None,
                 format: str = "auto") -> dict[str, Any]:
    """One datagram as a record:

    `{"timestamp": "2003-10-11T22:14:15.003Z", "level": "ERROR"|"WARN"|
    "INFO"|"DEBUG", "service": app name (else host, else "-"), "host", "app", "procid", "msgid"
    (None when absent/NILVALUE; host falls back to `sender`), "severity": 0-7,
    "severity_name": "emerg".."debug", "facility": 0-23, "facility_name", "message",
    "structured_data": {id: {name: value}} (RFC 5424 only), "format": "rfc5424"|"rfc3164"}`.

    `now` (epoch seconds, default the clock) gives a BSD timestamp its year, and the time of
    a message that has none. `format` is "auto", "rfc5424" or "rfc3164" (the other format is
    then malformed). Raises SyslogParseError when the datagram is not syslog.
    """
    return parse_syslog_timed(data, now, sender, format)[1]


def parse_syslog_timed(data: bytes, now: float | None = None, sender: str | None = None,
                       format: str = "auto") -> tuple[int, dict[str, Any]]:
    """(the record's time in epoch ms, the record) as parse_syslog gives it."""
    text = data.decode("utf-8", "replace")
    if now is None:
        now = time.time()
    if text.startswith("1 ", text.find(">") + 1) and format != "rfc3164":
        return _parse_5424(text, now, sender)
    if format == "rfc5424":
        raise SyslogParseError(_diagnose_pri(text) or "not RFC 5424: no version 1 after PRI")
    return _parse_3164(text, now, sender)


def _parse_5424(text: str, now: float, sender: str | None) -> tuple[int, dict[str, Any]]:
    m = _H5424.match(text)
    if m is None:
        raise SyslogParseError(_diagnose_5424(text))
    g = m.groups()
    pri = _pri(g[0])
    if g[1] is None:
        ts_ms, ts = _now(now)
    else:
        ts_ms, ts = _rfc3339(m, 2)
    host, app, procid, msgid = g[9:13]
    host = None if host == "-" else host
    app = None if app == "-" else app
    procid = None if procid == "-" else procid
    msgid = None if msgid == "-" else msgid
    pos = m.end()
    sd: dict[str, Any] = {}
    if text.startswith("-", pos):
        pos += 1
    else:
        pos = _structured_data(text, pos, sd)
    if pos == len(text):
        msg = ""
    elif text[pos] == " ":
        msg = text[pos + 1:]
        if msg.startswith("\ufeff"):
            msg = msg[1:]
        msg = msg.rstrip(_TRAILER)
    else:
        raise SyslogParseError("bad structured data: not followed by a space")
    if host is None:
        host = sender
    severity = pri & 7
    facility = pri >> 3
    return ts_ms, {
        "timestamp": ts, "level": LEVELS[severity],
        "service": app or host or "-", "host": host, "app": app, "procid": procid,
        "msgid": msgid, "severity": severity, "severity_name": SEVERITY_NAMES[severity],
        "facility": facility, "facility_name": FACILITY_NAMES[facility], "message": msg,
        "structured_data": sd, "format": "rfc5424"}


def _structured_data(text: str, pos: int, out: dict[str, Any]) -> int:
    """Parse SD-ELEMENTs from pos into out ({id: {name: value}}); the position after them."""
    if not text.startswith("[", pos):
        raise SyslogParseError("bad structured data: expected '-' or [id name=\"value\"...]")
    while text.startswith("[", pos):
        em = _SD_ELEMENT.match(text, pos)
        if em is None:
            raise SyslogParseError("bad structured data: expected [id name=\"value\"...]")
        pos = em.end()
        sd_id, params = em.groups()
        element = out.setdefault(sd_id, {})
        for name, value in _SD_PARAM.findall(params):
            if "\\" in value:
                value = _SD_UNESCAPE.sub(r"\1", value)
            if name in element:
                old = element[name]
                element[name] = (old if isinstance(old, list) else [old]) + [value]
            else:
                element[name] = value
    return pos


def _diagnose_pri(text: str) -> str | None:
    if not text:
        return "no PRI: empty datagram"
    if not text.startswith("<"):
        return "no PRI: does not start with '<'"
    m = _PRI.match(text)
    if m is None:
        return "bad PRI: expected <0> to <191>"
    if int(m.group(1)) > 191:
        return f"bad PRI: {int(m.group(1))} is over 191"
    return None


def _diagnose_5424(text: str) -> str:
    """Why an RFC 5424 header (it started "<PRI>1 ") did not match."""
    pri_error = _diagnose_pri(text)
    if pri_error:
        return pri_error
    parts = text[text.find(">") + 3:].split(" ", 5)
    names = ("TIMESTAMP", "HOSTNAME", "APP-NAME", "PROCID", "MSGID", "STRUCTURED-DATA")
    limits = (None, 255, 48, 128, 32, None)
    for i, name in enumerate(names):
        if i >= len(parts) or (parts[i] == "" and i < 5):
            return f"truncated RFC 5424 header: no {name} (or an empty field)"
        if i == 0 and parts[0] != "-" and not _TS_RE.match(parts[0]):
            return f"bad timestamp: {parts[0][:40]!r} is not RFC 3339"
        limit = limits[i]
        if limit is not None and len(parts[i]) > limit:
            return f"{name} longer than {limit} characters"
    return "bad RFC 5424 header"


def _parse_3164(text: str, now: float, sender: str | None) -> tuple[int, dict[str, Any]]:
    m = _PRI.match(text)
    if m is None:
        raise SyslogParseError(_diagnose_pri(text) or "bad PRI")
    pri = _pri(m.group(1))
    pos = m.end()
    tm = _T3164.match(text, pos)
    if tm is None:
        # No timestamp: as a relay does (RFC 3164 4.3.3), stamp it now, from the sender.
        ts_ms, ts = _now(now)
        host = sender
        bm = _TAG_ONLY.match(text, pos)
        if bm is None:
            app = procid = None
            msg = text[pos:]
        else:
            app, procid, msg = bm.groups()
    else:
        g = tm.groups()
        if g[0] is not None:
            ts_ms, ts = _bsd_time(g[0], g[1], g[2], g[3], g[4], now)
        else:
            ts_ms, ts = _rfc3339(tm, 6)
        b = _B3164.match(text, tm.end()).groups()  # type: ignore[union-attr]  # (.*) matches
        if b[0] is not None:
            host, app, procid = sender, b[0], b[1]
        else:
            host, app, procid = b[2] or sender, b[3], b[4]
        msg = b[5]
    msg = msg.rstrip(_TRAILER)
    severity = pri & 7
    facility = pri >> 3
    return ts_ms, {
        "timestamp": ts, "level": LEVELS[severity],
        "service": app or host or "-", "host": host, "app": app, "procid": procid or None,
        "msgid": None, "severity": severity, "severity_name": SEVERITY_NAMES[severity],
        "facility": facility, "facility_name": FACILITY_NAMES[facility], "message": msg,
        "format": "rfc3164"}
