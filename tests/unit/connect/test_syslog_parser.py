"""The syslog parser against the RFCs' own examples (RFC 5424 6.5, RFC 3164 5.4), every
PRI, structured data, NILVALUEs, the BSD year rollover, malformed datagrams with their
reasons, and the record shape spark_jobs/log_levels.py reads."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from clients.connect.connectors.syslog_parser import (FACILITY_NAMES, SEVERITY_NAMES,
                                                      SyslogParseError, iso_utc_ms, parse_syslog,
                                                      parse_syslog_timed)
from spark_jobs import etl_common, generate, log_levels
from tests.support.syslog_sender import MALFORMED, make_mix

BOM = b"\xef\xbb\xbf"
SENDER = "198.51.100.7"


def at(text: str) -> float:
    """An ISO instant as epoch seconds (the parser's `now`)."""
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


NOW = at("2024-06-15T12:00:00")
RECORD_KEYS = {"timestamp", "level", "service", "host", "app", "procid", "msgid", "severity",
               "severity_name", "facility", "facility_name", "message", "format"}


# ------------------------------------------------------------------ RFC 5424 (section 6.5)

def test_rfc5424_example_1_bom_and_nil_procid():
    r = parse_syslog(b"<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - "
                     + BOM + b"'su root' failed for lonvick on /dev/pts/8", NOW, SENDER)
    assert r == {"timestamp": "2003-10-11T22:14:15.003Z", "level": "ERROR", "service": "su",
                 "host": "mymachine.example.com", "app": "su", "procid": None, "msgid": "ID47",
                 "severity": 2, "severity_name": "crit", "facility": 4, "facility_name": "auth",
                 "message": "'su root' failed for lonvick on /dev/pts/8",
                 "structured_data": {}, "format": "rfc5424"}


def test_rfc5424_example_2_offset_and_microseconds():
    ms, r = parse_syslog_timed(b"<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710"
                               b" - - %% It's time to make the do-nuts.", NOW)
    assert r["timestamp"] == "2003-08-24T12:14:15.000Z"          # -07:00 moved to UTC
    assert ms == int(at("2003-08-24T12:14:15") * 1000)
    assert (r["host"], r["app"], r["procid"], r["msgid"]) == ("192.0.2.1", "myproc", "8710", None)
    assert (r["facility_name"], r["severity_name"], r["level"]) == ("local4", "notice", "INFO")
    assert r["message"] == "%% It's time to make the do-nuts."


def test_rfc5424_example_3_structured_data_then_message():
    r = parse_syslog(b'<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 '
                     b'[exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"] '
                     + BOM + b"An application event log entry...", NOW)
    assert r["structured_data"] == {"exampleSDID@32473": {"iut": "3", "eventSource": "Application",
                                                          "eventID": "1011"}}
    assert r["message"] == "An application event log entry..."


def test_rfc5424_example_4_two_elements_no_message():
    r = parse_syslog(b'<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 '
                     b'[exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"]'
                     b'[examplePriority@32473 class="high"]', NOW)
    assert r["structured_data"] == {
        "exampleSDID@32473": {"iut": "3", "eventSource": "Application", "eventID": "1011"},
        "examplePriority@32473": {"class": "high"}}
    assert r["message"] == ""


@pytest.mark.parametrize("stamp,iso", [
    ("1985-04-12T23:20:50.52Z", "1985-04-12T23:20:50.520Z"),        # RFC 5424 6.2.3.1
    ("1985-04-12T19:20:50.52-04:00", "1985-04-12T23:20:50.520Z"),
    ("2003-10-11T22:14:15.003Z", "2003-10-11T22:14:15.003Z"),
    ("2003-08-24T05:14:15.000003-07:00", "2003-08-24T12:14:15.000Z"),
    ("2024-01-01T00:30:00+01:00", "2023-12-31T23:30:00.000Z"),       # across a year
    ("2024-02-29T23:59:59.9999Z", "2024-02-29T23:59:59.999Z"),       # truncated, not rounded
])
def test_rfc5424_timestamps_to_utc_ms(stamp, iso):
    ms, r = parse_syslog_timed(f"<13>1 {stamp} h a - - - x".encode(), NOW)
    assert r["timestamp"] == iso
    assert ms == etl_common.parse_instant_ms(iso)


def test_rfc5424_nilvalues_everywhere():
    ms, r = parse_syslog_timed(b"<14>1 - - - - - -", NOW, SENDER)
    assert ms == int(NOW * 1000) and r["timestamp"] == iso_utc_ms(ms)     # receive time
    assert (r["host"], r["app"], r["procid"], r["msgid"]) == (SENDER, None, None, None)
    assert r["service"] == SENDER                   # no app: the host names the service
    assert r["message"] == "" and r["structured_data"] == {}
    assert parse_syslog(b"<14>1 - - - - - -", NOW)["service"] == "-"   # nothing at all


def test_structured_data_escapes_repeats_and_brackets_in_values():
    r = parse_syslog(b'<13>1 - h a - - [x@1 q="say \\"hi\\"" path="C:\\\\tmp" b="a\\]b" '
                     b'odd="\\n" tag="one" tag="two"][y@1] [not sd]', NOW)
    assert r["structured_data"] == {"x@1": {"q": 'say "hi"', "path": "C:\\tmp", "b": "a]b",
                                            "odd": "\\n", "tag": ["one", "two"]},
                                    "y@1": {}}
    assert r["message"] == "[not sd]"


def test_message_keeps_spaces_and_newlines_but_not_a_trailing_newline():
    r = parse_syslog(b"<13>1 - h a - - -  two  spaces\nsecond line\n", NOW)
    assert r["message"] == " two  spaces\nsecond line"


def test_bytes_that_are_not_utf8_are_replaced_not_malformed():
    r = parse_syslog(b"<13>1 - h a - - - caf\xe9 \xff", NOW)
    assert r["message"] == "caf\ufffd \ufffd"
    assert parse_syslog(b"<13>Jun  1 10:00:00 h a: \xe9t\xe9", NOW)["message"] == "\ufffdt\ufffd"


# ------------------------------------------------------------------ every PRI

@pytest.mark.parametrize("pri", range(192))
def test_every_pri_gives_facility_severity_and_level(pri):
    facility, severity = divmod(pri, 8)
    for datagram in (f"<{pri}>1 - h a - - - m".encode(), f"<{pri}>Jun  1 10:00:00 h a: m".encode()):
        r = parse_syslog(datagram, NOW)
        assert (r["facility"], r["severity"]) == (facility, severity)
        assert r["facility_name"] == FACILITY_NAMES[facility]
        assert r["severity_name"] == SEVERITY_NAMES[severity]
        assert r["level"] == ("ERROR" if severity <= 3 else "WARN" if severity == 4
                              else "INFO" if severity <= 6 else "DEBUG")


def test_names_of_severities_and_well_known_facilities():
    assert SEVERITY_NAMES == ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
    assert [FACILITY_NAMES[i] for i in (0, 1, 3, 4, 10, 16, 23)] == [
        "kern", "user", "daemon", "auth", "authpriv", "local0", "local7"]


# ------------------------------------------------------------------ RFC 3164 (section 5.4)

def test_rfc3164_example_1():
    r = parse_syslog(b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on "
                     b"/dev/pts/8", NOW, SENDER)
    assert r == {"timestamp": "2024-10-11T22:14:15.000Z", "level": "ERROR", "service": "su",
                 "host": "mymachine", "app": "su", "procid": None, "msgid": None, "severity": 2,
                 "severity_name": "crit", "facility": 4, "facility_name": "auth",
                 "message": "'su root' failed for lonvick on /dev/pts/8", "format": "rfc3164"}


def test_rfc3164_example_2_no_tag():
    r = parse_syslog(b"<13>Feb  5 17:32:18 10.0.0.99 Use the BFG!", NOW)
    assert r["timestamp"] == "2024-02-05T17:32:18.000Z"
    assert (r["host"], r["app"], r["service"]) == ("10.0.0.99", None, "10.0.0.99")
    assert r["message"] == "Use the BFG!"


def test_rfc3164_example_4_no_timestamp_is_stamped_on_receipt():
    text = b"<0>1990 Oct 22 10:52:01 TZ-6 scapegoat.dmz.example.org 10.1.2.3 sched[0]: That's All Folks!"
    ms, r = parse_syslog_timed(text, NOW, SENDER)
    assert ms == int(NOW * 1000) and r["host"] == SENDER
    assert r["message"] == text[3:].decode() and r["level"] == "ERROR"


def test_rfc3164_pid_missing_host_and_ipv6_host():
    r = parse_syslog(b"<30>Jun  1 10:00:00 db-2 postgres[999]: checkpoint: done", NOW, SENDER)
    assert (r["host"], r["app"], r["procid"], r["message"]) == ("db-2", "postgres", "999",
                                                                "checkpoint: done")
    r = parse_syslog(b"<30>Jun  1 10:00:00 sshd[12]: Accepted key", NOW, SENDER)
    assert (r["host"], r["app"], r["procid"], r["message"]) == (SENDER, "sshd", "12", "Accepted key")
    r = parse_syslog(b"<30>Jun  1 10:00:00 fe80::1 sshd: hi", NOW, SENDER)
    assert (r["host"], r["app"], r["message"]) == ("fe80::1", "sshd", "hi")
    r = parse_syslog(b"<30>Jun 01 10:00:00 h", NOW, SENDER)         # zero-padded day, no body
    assert (r["timestamp"], r["host"], r["message"]) == ("2024-06-01T10:00:00.000Z", "h", "")


def test_rfc3164_with_an_rfc3339_timestamp_as_rsyslog_sends():
    r = parse_syslog(b"<13>2024-06-01T10:00:00.5+02:00 web-1 app[1]: x", NOW)
    assert r["timestamp"] == "2024-06-01T08:00:00.500Z" and r["format"] == "rfc3164"
    assert (r["host"], r["app"], r["procid"]) == ("web-1", "app", "1")


def test_rfc3164_no_timestamp_with_a_tag():
    r = parse_syslog(b"<13>myapp[7]: started", NOW, SENDER)
    assert (r["host"], r["app"], r["procid"], r["message"]) == (SENDER, "myapp", "7", "started")


@pytest.mark.parametrize("now,stamp,iso", [
    ("2025-01-02T00:00:00", "Dec 31 23:59:59", "2024-12-31T23:59:59.000Z"),   # last year's
    ("2024-12-31T23:59:59", "Jan  1 00:00:01", "2025-01-01T00:00:01.000Z"),   # sender ahead
    ("2024-06-15T00:00:00", "Dec 31 23:59:59", "2024-12-31T23:59:59.000Z"),
    ("2024-06-15T00:00:00", "Jan  1 00:00:00", "2024-01-01T00:00:00.000Z"),
    ("2024-03-01T00:00:00", "Feb 29 12:00:00", "2024-02-29T12:00:00.000Z"),   # leap year
])
def test_rfc3164_year_comes_from_now_with_rollover(now, stamp, iso):
    assert parse_syslog(f"<13>{stamp} h a: m".encode(), at(now))["timestamp"] == iso


# ------------------------------------------------------------------ malformed

@pytest.mark.parametrize("datagram,reason", [
    (b"", "empty datagram"),
    (b"hello world", "no PRI"),
    (b" <13>1 - - - - - -", "no PRI"),
    (b"<192>1 - - - - - -", "192 is over 191"),
    (b"<999>Jun  1 10:00:00 h a: m", "999 is over 191"),
    (b"<1a>Jun  1 10:00:00 h a: m", "bad PRI"),
    (b"<>x", "bad PRI"),
    (b"<1234>x", "bad PRI"),
    (b"<13>1 2003-08-24T05:14:15.000000003-07:00 h a - - - x", "bad timestamp"),   # RFC's own
    (b"<13>1 2003-10-11 22:14:15Z h a - - - x", "bad timestamp"),
    (b"<13>1 2024-06-01T10:00:00 h a - - - no zone", "bad timestamp"),
    (b"<13>1 2024-13-01T10:00:00Z h a - - - x", "no month 13"),
    (b"<13>1 2023-02-29T10:00:00Z h a - - - x", "no such date"),
    (b"<13>1 2024-06-01T24:00:00Z h a - - - x", "time of day out of range"),
    (b"<13>1 2024-06-01T10:00:00+25:00 h a - - - x", "offset out of range"),
    (b"<13>1 - h a - -", "no STRUCTURED-DATA"),
    (b"<13>1 - h", "no APP-NAME"),
    (b"<13>1 - h a", "no PROCID"),
    (b"<13>1 - h " + b"a" * 49 + b" - - - x", "APP-NAME longer than 48"),
    (b"<13>1 - h a - " + b"m" * 33 + b" - x", "MSGID longer than 32"),
    (b"<13>1 - h a - - [id x=\"1\"", "bad structured data"),
    (b"<13>1 - h a - - [id x=1] m", "bad structured data"),
    (b"<13>1 - h a - - x", "bad structured data"),
    (b"<13>1 - h a - - -x", "not followed by a space"),
    (b"<13>Feb 30 10:00:00 h a: m", "no such date"),
    (b"<13>Jun  1 25:00:00 h a: m", "time of day out of range"),
])
def test_malformed_datagrams_say_why(datagram, reason):
    with pytest.raises(SyslogParseError) as e:
        parse_syslog(datagram, NOW)
    assert reason in e.value.reason and str(e.value) == e.value.reason


def test_feb_29_of_a_common_year_is_malformed():
    with pytest.raises(SyslogParseError, match="no such date"):
        parse_syslog(b"<13>Feb 29 12:00:00 h a: m", at("2025-03-01T00:00:00"))


def test_forced_format():
    bsd = b"<13>Jun  1 10:00:00 h a: m"
    with pytest.raises(SyslogParseError, match="not RFC 5424"):
        parse_syslog(bsd, NOW, format="rfc5424")
    assert parse_syslog(bsd, NOW, format="rfc3164")["app"] == "a"
    # Read as BSD, an RFC 5424 datagram has no BSD timestamp: all of it is the message.
    r = parse_syslog(b"<13>1 - h a - - - m", NOW, SENDER, format="rfc3164")
    assert (r["format"], r["message"], r["host"]) == ("rfc3164", "1 - h a - - - m", SENDER)


def test_the_senders_malformed_datagrams_are_all_refused():
    for datagram in MALFORMED:
        with pytest.raises(SyslogParseError):
            parse_syslog(datagram, NOW)


# ------------------------------------------------------------------ what log_levels reads

def test_records_have_the_shape_log_levels_reads():
    """Every record of the sender's mix: JSON-able, the keys of log_levels' LOG_SCHEMA as
    strings, a timestamp in the generator's own ISO form (etl_common.iso_ms), a level the
    generator also writes, and the header fields with their types."""
    read_fields = [f.split()[0] for f in log_levels.LOG_SCHEMA.split(",")]
    known_levels = {level for level, _ in generate.LEVELS}
    mix = make_mix(400, 0, seed=3)
    for datagram in mix.datagrams:
        ms, r = parse_syslog_timed(datagram, NOW, SENDER)
        assert json.loads(json.dumps(r)) == r
        assert set(r) == RECORD_KEYS | ({"structured_data"} if r["format"] == "rfc5424" else set())
        for name in read_fields:
            assert isinstance(r[name], str) and r[name], name
        assert etl_common.iso_ms(etl_common.parse_instant_ms(r["timestamp"])) == r["timestamp"]
        assert etl_common.parse_instant_ms(r["timestamp"]) == ms
        assert r["level"] in known_levels
        assert isinstance(r["severity"], int) and isinstance(r["facility"], int)
        assert r["format"] in ("rfc5424", "rfc3164")


def test_the_senders_mix_parses_into_its_expected_counts():
    mix = make_mix(1000, malformed_every=9, seed=5)
    formats: dict[str, int] = {}
    levels: dict[str, int] = {}
    malformed = 0
    for datagram in mix.datagrams:
        try:
            r = parse_syslog(datagram, NOW, SENDER)
        except SyslogParseError:
            malformed += 1
            continue
        formats[r["format"]] = formats.get(r["format"], 0) + 1
        levels[r["level"]] = levels.get(r["level"], 0) + 1
    assert malformed == mix.malformed == 111
    assert formats == dict(mix.by_format) and levels == dict(mix.by_level)
    assert set(levels) == {"ERROR", "WARN", "INFO", "DEBUG"}


def test_iso_utc_ms():
    assert iso_utc_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_utc_ms(1_717_243_200_123) == "2024-06-01T12:00:00.123Z"
