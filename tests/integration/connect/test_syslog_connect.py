"""UDP syslog into a topic through Kafka Connect: a standalone worker runs the SyslogSource
connector (JsonConverter without schemas, StringConverter keys) on a free UDP port; another
process (tests/support/syslog_sender.py) sends 100,000 datagrams, RFC 5424 and RFC 3164 with
every K-th malformed, at a fixed rate over loopback.

Then the task's counters (the worker's GET /metrics) add up: every datagram sent is received,
dropped by the full queue or dropped by the kernel (received + dropped + socket drops ==
sent); every received one is parsed or malformed, malformed as many as the sender sent. The
topic, read to its end offsets with strom's consumer once the worker has stopped (flushed),
holds exactly `received` records (malformed.policy=record keeps the malformed ones as
`{"malformed": true, ...}`), each well-formed one the syslog JSON log_levels reads, and the
multiset of them is what the datagrams that arrived parse into.

`run_syslog_pipeline` is also what tests/spark/test_syslog_log_levels.py runs before the
log_levels ETL job reads the topic.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.connect.connectors.syslog_parser import LEVELS, parse_syslog
from tests.support.broker_process import REPO
from tests.support.connect_worker import ConnectWorker, wait_until
from tests.support.syslog_sender import MALFORMED, Mix, make_mix

COUNT = 100_000
RATE = 20_000               # datagrams a second: 5 s of sending
MALFORMED_EVERY = 50        # 2,000 malformed
SEED = 21
MAX_LOSS = 0.01             # loopback at 20k/s loses nothing in practice; 1% is a failure
CONNECTOR = "syslog-udp"
SYSLOG_FIELDS = {"timestamp", "level", "service", "host", "app", "severity", "facility",
                 "message"}
ISO_UTC_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")
_SAMPLE = re.compile(r'^(kafka_connect_\w+)\{([^}]*)\} (\S+)$')


@dataclass
class SyslogRun:
    """What one run of the pipeline sent, counted and wrote."""

    topic: str
    mix: Mix = field(repr=False)               # the datagrams the sender sent
    sender: dict[str, Any]                     # the sender's JSON summary
    metrics: dict[str, float]                  # the task's counters once they settled
    expected: Counter[str] = field(repr=False)  # expected_values() of the datagrams sent
    seconds: dict[str, float] = field(default_factory=dict)   # wall time of each phase
    worker_log: str = field(default="", repr=False)
    records: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list, repr=False)

    @property
    def lost(self) -> int:
        m = self.metrics
        return int(m["syslog_datagrams_dropped_total"] + m["syslog_socket_drops_total"])


def task_metrics(worker: ConnectWorker, connector: str = CONNECTOR) -> dict[str, float]:
    """The worker's /metrics samples of task 0 of `connector`, by name without the
    `kafka_connect_` prefix (Prometheus text, parsed as a scraper would)."""
    with urllib.request.urlopen(worker.url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    want = f'connector="{connector}",task="0"'
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(2) == want:
            out[m.group(1)[len("kafka_connect_"):]] = float(m.group(3))
    return out


def start_syslog_worker(bootstrap: str, workdir: Path, topic: str) -> ConnectWorker:
    """A standalone worker running the syslog source on an ephemeral loopback UDP port."""
    connector = workdir / "syslog-source.properties"
    workdir.mkdir(parents=True, exist_ok=True)
    connector.write_text("".join(f"{k}={v}\n" for k, v in {
        "name": CONNECTOR, "connector.class": "SyslogSource", "tasks.max": "1",
        "topic": topic, "syslog.host": "127.0.0.1", "syslog.port": "0",
        "malformed.policy": "record"}.items()))
    return ConnectWorker(workdir, "standalone", {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false"}, [connector]).start()


def read_topic(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[str | None, dict]]:
    """Every record of `topic` up to its end offsets now: (key, JSON value parsed)."""
    from clients import Consumer, TopicPartition

    out: list[tuple[str | None, dict]] = []
    # Big fetches: 100,000 records in a dozen polls instead of two hundred (~3x faster).
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                  max_poll_records=10_000, max_partition_fetch_bytes=8 << 20,
                  fetch_max_bytes=64 << 20) as c:
        tps = [TopicPartition(topic, p) for p in c.partitions_for(topic)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            for r in c.poll(0.5):
                assert isinstance(r.value, bytes), r      # no deserializer: raw bytes
                out.append((r.key.decode() if isinstance(r.key, bytes) else None,
                            json.loads(r.value)))
    return out


def run_syslog_pipeline(bootstrap: str, workdir: Path, topic: str, count: int = COUNT,
                        rate: int = RATE, malformed_every: int = MALFORMED_EVERY,
                        seed: int = SEED, expect: bool = True) -> SyslogRun:
    """Worker up, sender run to the end, counters settled, worker stopped (its producer
    flushed), topic read. Fails when a datagram is unaccounted for. `expect`: also compute
    `expected` (what the datagrams parse into, some seconds of CPU)."""
    from clients import AdminClient, NewTopic

    seconds: dict[str, float] = {}
    mark = time.monotonic()

    def lap(phase: str) -> None:
        nonlocal mark
        now = time.monotonic()
        seconds[phase] = round(now - mark, 1)
        mark = now

    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    worker = start_syslog_worker(bootstrap, workdir, topic)
    try:
        port = int(wait_until(lambda: task_metrics(worker).get("syslog_port"), timeout=30,
                              what="the syslog task listening"))
        lap("worker start")
        sender = subprocess.run(
            [sys.executable, "-m", "tests.support.syslog_sender", "--host", "127.0.0.1",
             "--port", str(port), "--count", str(count), "--rate", str(rate),
             "--malformed-every", str(malformed_every), "--seed", str(seed)],
            cwd=REPO, capture_output=True, text=True, timeout=count / rate + 60)
        assert sender.returncode == 0, sender.stderr
        summary = json.loads(sender.stdout)
        lap("send")
        # While the worker works off its backlog: what the datagrams should become.
        mix = make_mix(count, malformed_every, seed)
        expected = expected_values(mix, time.time()) if expect else Counter()
        lap("expectations")

        def settled() -> dict[str, float] | None:
            m = task_metrics(worker)
            seen = (m["syslog_datagrams_received_total"] + m["syslog_datagrams_dropped_total"]
                    + m["syslog_socket_drops_total"])
            taken = m["syslog_datagrams_parsed_total"] + m["syslog_datagrams_malformed_total"]
            done = (seen == summary["sent"] and taken == m["syslog_datagrams_received_total"]
                    and m["source_task_metrics_source_record_write_total"] == taken)
            return m if done else None
        metrics = wait_until(settled, timeout=30, interval=0.3,
                             what="every datagram counted and written")
        code, status = worker.rest("GET", f"/connectors/{CONNECTOR}/status")
        assert code == 200 and status["connector"]["state"] == "RUNNING", status
        assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status
        lap("settle")
    except (AssertionError, TimeoutError) as e:
        raise AssertionError(f"{e}\nworker log:\n{worker.output()[-3000:]}") from e
    finally:
        rc = worker.stop()
    log_text = worker.output()
    assert rc == 0, log_text[-4000:]
    lap("worker stop")
    run = SyslogRun(topic, mix, summary, metrics, expected, seconds, log_text)
    run.records = read_topic(bootstrap, topic)
    lap("read topic")
    return run


def check_counters(run: SyslogRun, max_loss: float = MAX_LOSS) -> None:
    """received + dropped + socket drops == sent, at most `max_loss` of it dropped;
    received == parsed + malformed == records written; with no loss, malformed and parsed
    are exactly what the sender sent."""
    m, sent = run.metrics, run.sender["sent"]
    received = m["syslog_datagrams_received_total"]
    malformed = m["syslog_datagrams_malformed_total"]
    parsed = m["syslog_datagrams_parsed_total"]
    assert sent == len(run.mix.datagrams) and run.sender["malformed"] == run.mix.malformed
    assert received + run.lost == sent
    assert parsed + malformed == received
    assert run.lost <= max_loss * sent, (
        f"{run.lost} of {sent} datagrams dropped ({m['syslog_datagrams_dropped_total']:.0f} "
        f"by the full queue, {m['syslog_socket_drops_total']:.0f} by the kernel: the socket's "
        f"buffer overflowed); worker log:\n{run.worker_log[-3000:]}")
    if run.lost == 0:
        assert malformed == run.mix.malformed
        assert parsed == sent - run.mix.malformed
    else:        # which ones were lost is unknown: bounds only
        assert malformed <= run.mix.malformed and parsed <= sent - run.mix.malformed
    assert m["source_task_metrics_source_record_write_total"] == received


def expected_values(mix: Mix, now: float) -> Counter[str]:
    """What each well-formed datagram parses into (JSON text, keys sorted), as a multiset.
    `now` only gives the RFC 3164 datagrams their year (they carry no year)."""
    bad = set(MALFORMED)
    return Counter(json.dumps(parse_syslog(d, now, "127.0.0.1"), sort_keys=True)
                   for d in mix.datagrams if d not in bad)


def test_syslog_udp_to_topic_every_datagram_accounted_for(broker, tmp_path):
    started = time.monotonic()
    run = run_syslog_pipeline(broker.bootstrap, tmp_path / "worker", "syslog")
    print(f"sent {run.sender['sent']} in {run.sender['seconds']} s; metrics {run.metrics}")
    check_counters(run)
    m = run.metrics

    # The topic holds exactly the datagrams received: no record lost or written twice.
    assert len(run.records) == m["syslog_datagrams_received_total"]
    malformed = [v for _, v in run.records if v.get("malformed") is True]
    parsed = [(k, v) for k, v in run.records if "malformed" not in v]
    assert len(malformed) == m["syslog_datagrams_malformed_total"]
    assert len(parsed) == m["syslog_datagrams_parsed_total"]
    texts = {t.decode("utf-8", "replace") for t in MALFORMED}
    for v in malformed:
        assert v["message"] in texts and v["reason"] and v["host"] == "127.0.0.1", v
        assert ISO_UTC_MS.match(v["timestamp"]), v

    # Each well-formed record is the syslog JSON log_levels reads, keyed by its host.
    for k, v in parsed:
        assert SYSLOG_FIELDS <= v.keys(), v
        assert k == v["host"] and ISO_UTC_MS.match(v["timestamp"]), (k, v)
        assert v["level"] == LEVELS[v["severity"]] and 0 <= v["facility"] <= 23, v
        assert v["service"] == v["app"] and v["format"] in ("rfc5424", "rfc3164"), v
    # The multiset of values is what the datagrams that arrived parse into.
    got = Counter(json.dumps(v, sort_keys=True) for _, v in parsed)
    want = run.expected
    assert not got - want, list((got - want).items())[:3]
    if run.lost == 0:
        assert got == want
        first = next(v for _, v in parsed if v["message"].startswith("request 0 "))
        assert first["format"] == "rfc5424" and first["timestamp"] == "2024-06-01T12:00:00.000Z"
        assert Counter(v["level"] for _, v in parsed) == run.mix.by_level
        assert Counter(v["format"] for _, v in parsed) == run.mix.by_format
    print(f"test_syslog_connect: {time.monotonic() - started:.1f} s in the test, "
          f"phases {run.seconds}")
