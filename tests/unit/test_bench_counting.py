"""What the benchmarks count (bench/_common.py, bench/latency.py, bench/partitions.py), without
a broker: only acknowledged records, a delivery error fails the run, the consume clock, the
per-record spread, medians that never mix runs, and one results file per run."""
from __future__ import annotations

import json
import zlib
from types import SimpleNamespace

import pytest

from bench._common import (CHUNK, BenchFailure, DeliveryCounter, RateClock, Results,
                           chunk_length, median_of_runs, median_run, partition_sequence,
                           round_robin_keys, run_main, runs_note, spread_check)
from bench.latency import window_accounting
from bench.partitions import cost_vs_first


class _Err:
    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


# ---- delivery reports --------------------------------------------------------------------------

def test_errors_only_mode_counts_queued_minus_failed():
    c = DeliveryCounter(every=False)
    assert c.config() == {"delivery.report.only.error": True}
    assert c.settle(queued=1000, unflushed=0) == 1000


def test_every_report_mode_counts_only_the_acknowledged():
    c = DeliveryCounter(every=True)
    assert c.config() == {"delivery.report.only.error": False}
    for _ in range(7):
        c(None, None)
    assert c.settle(queued=7, unflushed=0) == 7


def test_queued_but_never_reported_is_not_counted_as_acknowledged():
    c = DeliveryCounter(every=True)
    for _ in range(5):
        c(None, None)
    with pytest.raises(BenchFailure, match="10 records queued but 5 acknowledged"):
        c.settle(queued=10, unflushed=0)


@pytest.mark.parametrize("every", [False, True])
def test_a_delivery_error_fails_the_run_and_names_the_error(every):
    c = DeliveryCounter(every=every)
    c(None, None)
    c(_Err("KafkaError{code=NOT_LEADER_OR_FOLLOWER}"), None)
    c(_Err("KafkaError{code=NOT_LEADER_OR_FOLLOWER}"), None)
    c(_Err("KafkaError{code=_MSG_TIMED_OUT}"), None)
    with pytest.raises(BenchFailure) as e:
        c.settle(queued=4, unflushed=0, what="produce to t")
    text = str(e.value)
    assert text.startswith("produce to t: 3 of 4 records failed delivery")
    assert "2 x KafkaError{code=NOT_LEADER_OR_FOLLOWER}" in text
    assert "1 x KafkaError{code=_MSG_TIMED_OUT}" in text


def test_records_left_by_flush_fail_the_run():
    c = DeliveryCounter()
    with pytest.raises(BenchFailure, match="2 of 10 records still unacknowledged after flush"):
        c.settle(queued=10, unflushed=2)


def test_run_main_prints_a_failure_and_exits_1(capsys):
    def failing() -> int:
        raise BenchFailure("produce to t: 1 of 9 records failed delivery (1 x boom)")
    with pytest.raises(SystemExit) as e:
        run_main(failing)
    assert e.value.code == 1
    assert "FAILED: produce to t: 1 of 9 records failed delivery (1 x boom)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        run_main(lambda: 0)
    assert e.value.code == 0


# ---- the consume clock ---------------------------------------------------------------------------

def test_the_first_batch_starts_the_clock_and_is_not_in_the_rate():
    clock = RateClock()
    clock.add(100_000, now=10.0)      # arrived before the clock could start
    clock.add(50_000, now=10.5)
    clock.add(50_000, now=11.0)
    assert clock.total == 200_000
    assert clock.first == 100_000
    assert clock.timed == 100_000
    assert clock.seconds == pytest.approx(1.0)
    assert clock.rate == pytest.approx(100_000)


def test_one_batch_gives_no_rate_and_empty_batches_change_nothing():
    clock = RateClock()
    clock.add(0, now=1.0)
    assert clock.t0 is None
    clock.add(500, now=2.0)
    clock.add(0, now=3.0)
    assert clock.rate is None and clock.total == 500 and clock.seconds == 0.0


# ---- spreading records over partitions --------------------------------------------------------------

@pytest.mark.parametrize("partitions", [1, 3, 16, 100, 1000, 2500])
def test_round_robin_keys_map_to_their_partition_under_crc32(partitions):
    keys = round_robin_keys(partitions)
    assert len(set(keys)) == partitions
    assert [zlib.crc32(k) % partitions for k in keys] == list(range(partitions))
    assert max(len(k) for k in keys) <= 4


def test_per_record_spread_puts_consecutive_records_on_consecutive_partitions():
    seq = partition_sequence(1000, 5000, 50_000_000, "record")
    assert seq[:3] == [0, 1, 2] and seq[999:1002] == [999, 0, 1]
    assert all(seq.count(p) == 5 for p in range(1000))
    # every call (CHUNK records) covers every partition, so 1,000 are active together
    assert set(seq[:CHUNK]) == set(range(1000))


def test_chunk_spread_sends_one_call_to_one_partition():
    seq = partition_sequence(1000, 3 * CHUNK, 50_000_000, "chunk")
    assert set(seq[:CHUNK]) == {0}
    assert set(seq[CHUNK:2 * CHUNK]) == {1}


@pytest.mark.parametrize("partitions,expected", [(1, 2000), (3, 1998), (16, 2000), (1000, 2000),
                                                 (3000, 3000)])
def test_chunk_length_is_a_multiple_of_the_partitions(partitions, expected):
    assert chunk_length(partitions, 50_000_000, "record") == expected
    assert chunk_length(partitions, 50_000_000, "record") % partitions == 0
    assert chunk_length(partitions, 50_000_000, "chunk") == CHUNK
    assert chunk_length(partitions, 10, "record") == 10


def test_spread_check_counts_the_partitions_a_run_wrote():
    assert spread_check([1, 1, 1, 5], [3, 1, 4, 9]) == {
        "partitions_written": 3, "partitions": 4, "min_records": 0, "max_records": 4}


def test_cost_against_one_partition():
    assert cost_vs_first([100.0, 90.0, 120.0]) == pytest.approx([0.0, 0.1, -0.2])
    assert cost_vs_first([None, 5.0]) == [None, None]


# ---- medians --------------------------------------------------------------------------------------

def test_median_of_runs():
    m = median_of_runs([300.0, 100.0, 200.0])
    assert m["median"] == 200.0 and m["n"] == 3 and m["enough"]
    assert m["spread"] == pytest.approx(1.0)           # (300 - 100) / 200
    assert median_of_runs([None, 4.0, 2.0])["median"] == 3.0
    assert not median_of_runs([1.0, 2.0])["enough"]
    assert median_of_runs([])["median"] is None


def test_median_run_takes_one_whole_run_and_never_mixes_runs():
    runs = [{"run": 0, "p50_ms": 3.0, "p99_ms": 40.0},
            {"run": 1, "p50_ms": 9.0, "p99_ms": 10.0},
            {"run": 2, "p50_ms": 5.0, "p99_ms": 20.0}]
    m = median_run(runs, "p99_ms")
    assert m == runs[2]       # p99 20 is the median; its p50 (5.0) comes with it, not 3.0
    assert median_run(runs[:2], "p99_ms") == runs[1]   # even count: the lower middle run
    assert median_run([], "p99_ms") is None


def test_a_table_says_when_it_rests_on_fewer_than_3_runs():
    assert runs_note(3) == "median of 3 runs"
    assert "FEWER THAN 3" in runs_note(1) and "FEWER THAN 3" in runs_note(2)


# ---- latency accounting --------------------------------------------------------------------------

def test_latency_window_all_arrived():
    acct = window_accounting(created_in_window=1000, unqueued_in_window=10, failed_in_window=0,
                             unflushed=0, received=990)
    assert (acct["queued"], acct["acknowledged"], acct["lost"], acct["problems"]) == (990, 990, 0, [])


def test_latency_window_reports_lost_records():
    acct = window_accounting(1000, 0, 0, 0, received=997)
    assert acct["lost"] == 3
    assert acct["problems"] == ["3 of 1000 acknowledged records never arrived (LOST)"]


def test_latency_window_reports_delivery_errors_and_unflushed_records():
    acct = window_accounting(1000, 0, failed_in_window=2, unflushed=5, received=998)
    assert acct["acknowledged"] == 998 and acct["lost"] == 0
    assert acct["problems"] == ["2 delivery error(s)", "5 record(s) unacknowledged after flush()"]


# ---- one results file per run ------------------------------------------------------------------

def test_results_writes_one_file_per_run_and_a_summary(tmp_path):
    a = SimpleNamespace(results_dir=str(tmp_path), label="before", no_results=False, repeats=3)
    out = Results("produce_consume", a, {"cpus": 2})
    for r in range(3):
        out.run(f"strom-1-100B-p1-none-run{r}", {"produce": {"records": 10 + r}})
    out.summary({"results": [{"produce": median_of_runs([10.0, 11.0, 12.0])}]})
    (d,) = tmp_path.iterdir()
    assert d.name.startswith("produce_consume-") and d.name.endswith("-before")
    names = sorted(p.name for p in d.iterdir())
    assert names == ["strom-1-100B-p1-none-run0.json", "strom-1-100B-p1-none-run1.json",
                     "strom-1-100B-p1-none-run2.json", "summary.json"]
    run1 = json.loads((d / "strom-1-100B-p1-none-run1.json").read_text())
    assert run1["produce"] == {"records": 11} and run1["machine"] == {"cpus": 2}
    summary = json.loads((d / "summary.json").read_text())
    assert summary["run_files"] == names[:3]
    assert summary["results"][0]["produce"]["median"] == 11.0


def test_no_results_writes_nothing(tmp_path):
    a = SimpleNamespace(results_dir=str(tmp_path), label="", no_results=True)
    out = Results("latency", a, {})
    assert out.run("x", {}) is None and out.summary({}) is None
    assert list(tmp_path.iterdir()) == []


def test_count_batch_records_reads_whole_batches_from_their_headers():
    from bench._common import count_batch_records
    from clients.protocol.records import Record, build_batch
    batch = build_batch([Record(None, v) for v in (b"x", b"y", b"z")], base_offset=10)
    assert count_batch_records(batch + batch) == (6, 13)
    assert count_batch_records(batch + batch[:20]) == (3, 13)       # a partial batch at the end
    assert count_batch_records(batch[:20]) == (0, -1)
    assert count_batch_records(None) == (0, -1)


def test_the_perf_tools_lines_are_read_as_the_tools_print_them() -> None:
    from bench.perf_tools import parse_consumer, parse_producer
    produced = parse_producer(
        "52341 records sent, 10468.2 records/sec (1.00 MB/sec), 12.50 ms avg latency, 40.00 ms max "
        "latency.\n"
        "1000000 records sent, 110176.000000 records/sec (10.51 MB/sec), 3.19 ms avg latency, "
        "48.21 ms max latency, 2 ms 50th, 6 ms 95th, 11 ms 99th, 30 ms 99.9th.\n")
    assert produced == {"records": 1_000_000, "records_per_s": 110176.0, "mb_per_s": 10.51,
                        "avg_latency_ms": 3.19, "max_latency_ms": 48.21, "p50_ms": 2,
                        "p95_ms": 6, "p99_ms": 11}
    consumed = parse_consumer(
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-11-27 03:24:01:100, 2026-11-27 03:24:03:600, 95.3674, 38.1470, 1000000, "
        "400000.0000, 80, 2420, 39.4080, 413223.1405\n")
    assert consumed == {"mb": 95.3674, "mb_per_s": 38.147, "records": 1_000_000,
                        "records_per_s": 400000.0}
    with pytest.raises(ValueError):
        parse_producer("the tool failed before its summary")


def test_the_latency_series_buckets_records_by_the_second_they_arrived() -> None:
    from bench.latency import by_second
    start = 10_000_000_000
    arrived = [start + 100_000_000, start + 900_000_000, start + 1_500_000_000,
               start - 5_000_000]                    # before the window: counted in second 0
    series = by_second(arrived, [5.0, 7.0, 300.0, 1.0], start)
    assert [row[:2] for row in series] == [[0, 3], [1, 1]]
    assert series[1][3] == 300.0 and series[0][4] == 7.0


def test_the_loop_blocked_lines_are_cut_to_the_measured_window() -> None:
    from bench.latency import loop_blocked_window
    lines = [{"t": t, "blocked_ms": {"11": 5 * t, "12": 0}, "waits": {"ext4_x": t}}
             for t in range(8)]
    w = loop_blocked_window(lines, [11, 12], warmup=3.0, seconds=4.0)
    # Sampler seconds 3..6 are the window's seconds 0..3.
    assert w["loop_blocked_ms_by_second"] == [[0, 15, 0], [1, 20, 0], [2, 25, 0], [3, 30, 0]]
    assert w["loop_blocked_ms"] == [90, 0]
    assert w["loop_blocked_worst_second_ms"] == 30
    assert w["loop_blocked_waits"] == {"ext4_x": 3 + 4 + 5 + 6}
    assert loop_blocked_window(lines, [], 3.0, 4.0) == {}     # the mock: no broker pids
    # Lines without run-queue figures (older samplers) count as zero.
    assert w["loop_cpu_ms"] == [0, 0] and w["loop_runq_ms"] == [0, 0]


def test_the_loops_cpu_and_run_queue_wait_are_cut_to_the_window_and_summed() -> None:
    from bench.latency import _cores, loop_blocked_window
    lines = [{"t": t, "blocked_ms": {"11": 0, "12": 0}, "waits": {},
              "cpu_ms": {"11": 100.0 * t, "12": 50.0}, "runq_ms": {"11": 10.0, "12": 20.0 * t}}
             for t in range(8)]
    w = loop_blocked_window(lines, [11, 12], warmup=3.0, seconds=4.0)
    # [s, ran 11, ran 12, waited 11, waited 12] for sampler seconds 3..6
    assert w["loop_cpu_runq_ms_by_second"][0] == [0, 300.0, 50.0, 10.0, 60.0]
    assert w["loop_cpu_ms"] == [1800.0, 200.0]        # 300+400+500+600; 4 x 50
    assert w["loop_runq_ms"] == [40.0, 360.0]         # 4 x 10; 60+80+100+120
    assert _cores(w) == "0.50/0.10"                   # 2,000 and 400 ms over 4 s


def test_busy_share_of_the_machine_counts_idle_and_iowait_as_idle() -> None:
    from bench.latency import busy_pct
    # user, nice, system, idle, iowait, irq, softirq, steal
    before = [100, 0, 50, 1000, 10, 0, 0, 0]
    after = [160, 0, 70, 1100, 20, 5, 5, 0]
    assert busy_pct(before, after) == 45.0            # 90 busy of 200 ticks
    assert busy_pct(before, before) == 0.0


def test_the_loop_sampler_stops_with_its_pids_and_counts_a_sleeping_loop_as_running(tmp_path):
    import subprocess
    import sys

    from bench import loop_blocked
    # Sampled only once it is asleep: a starting interpreter reads its files from disk
    # (state D) on a loaded machine, which is what the sampler is there to count.
    child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(1.6)"],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "up\n"
    out = tmp_path / "blocked.jsonl"
    loop_blocked.sample(str(out), [child.pid], every_ms=5.0)   # returns once the child is gone
    child.wait()
    lines = loop_blocked.read(str(out))
    assert len(lines) >= 1
    assert all(x["blocked_ms"] == {str(child.pid): 0} for x in lines)  # asleep (S), not in D
    # asleep: hardly ran (a second in which it exited has no figure for it)
    assert all(x["cpu_ms"].get(str(child.pid), 0) < 100 for x in lines)


def test_the_loop_sampler_reads_how_long_a_busy_thread_ran(tmp_path):
    import subprocess
    import sys

    from bench import loop_blocked
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.6: pass"])
    out = tmp_path / "busy.jsonl"
    loop_blocked.sample(str(out), [child.pid], every_ms=5.0)
    child.wait()
    lines = loop_blocked.read(str(out))
    # its first whole second on a CPU: ran + waited for a CPU is about a second
    first = lines[0]
    assert first["cpu_ms"][str(child.pid)] + first["runq_ms"][str(child.pid)] > 600
    assert first["cpu_ms"][str(child.pid)] > 200
