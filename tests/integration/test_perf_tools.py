"""kafka-producer-perf-test and kafka-consumer-perf-test as subprocesses (the bin/ wrappers)
against a real broker: Kafka's output formats and the record counts. Tests, not benchmarks:
a few thousand records, no timing assertions."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCER = str(REPO / "bin" / "kafka-producer-perf-test.sh")
CONSUMER = str(REPO / "bin" / "kafka-consumer-perf-test.sh")

FINAL = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$")
WINDOW = re.compile(r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                    r"[\d.]+ ms max latency\.$")
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
ROW = re.compile(rf"^{TIME}, {TIME}, ([\d.]+), [\d.]+, (\d+), [\d.]+, \d+, \d+, [\d.]+, [\d.]+$")


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def three_partition_broker(broker_factory):
    return broker_factory({"num.partitions": "3", "auto.create.topics.enable": "true"})


def test_producer_then_consumer_perf(three_partition_broker):
    bs = three_partition_broker.bootstrap
    p = run(PRODUCER, "--topic", "perf", "--num-records", "3000", "--record-size", "100",
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={bs}", "acks=1",
            "--reporting-interval", "100")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    m = FINAL.match(lines[-1])
    assert m, lines[-1]
    assert int(m.group(1)) == 3000
    assert all(WINDOW.match(line) for line in lines[:-1]), lines

    c = run(CONSUMER, "--bootstrap-server", bs, "--topic", "perf", "--messages", "3000",
            "--timeout", "20000")
    assert c.returncode == 0, c.stderr
    out = c.stdout.strip().splitlines()
    assert out[0] == HEADER
    m = ROW.match(out[1])
    assert m, out[1]
    assert int(m.group(2)) == 3000
    assert float(m.group(1)) == pytest.approx(3000 * 100 / 2**20, abs=1e-3)


def test_producer_perf_throttled_with_config_file(three_partition_broker, tmp_path):
    cfg = tmp_path / "producer.properties"
    cfg.write_text(f"bootstrap.servers={three_partition_broker.bootstrap}\nacks=all\n")
    p = run(PRODUCER, "--topic", "throttled", "--num-records", "500", "--record-size", "10",
            "--throughput", "1000", "--producer.config", str(cfg))
    assert p.returncode == 0, p.stderr
    m = FINAL.match(p.stdout.strip().splitlines()[-1])
    assert m and int(m.group(1)) == 500
    rate = float(p.stdout.strip().splitlines()[-1].split(", ")[1].split()[0])
    assert rate < 1500          # paced to about 1000 records/s


def test_consumer_perf_times_out_on_missing_records(three_partition_broker):
    bs = three_partition_broker.bootstrap
    assert run(PRODUCER, "--topic", "short", "--num-records", "100", "--payload-monotonic",
               "--throughput", "-1", "--producer-props", f"bootstrap.servers={bs}").returncode == 0
    c = run(CONSUMER, "--bootstrap-server", bs, "--topic", "short", "--messages", "1000",
            "--timeout", "1500", "--hide-header")
    assert c.returncode == 0, c.stderr
    out = c.stdout.strip().splitlines()
    assert out[0].startswith("WARNING: Exiting before consuming the expected number of messages")
    m = ROW.match(out[1])
    assert m and int(m.group(2)) == 100


def test_usage_errors_are_one_line(three_partition_broker):
    p = run(PRODUCER, "--topic", "x", "--num-records", "1", "--throughput", "-1", "--record-size", "1")
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0 and "bootstrap.servers" in p.stderr
    c = run(CONSUMER, "--topic", "x")
    assert c.returncode == 2 and "--messages" in c.stderr
