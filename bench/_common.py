"""Shared by the bench/ scripts: the systems under test (a standalone strom broker, a 3-broker
strom cluster on a real ZooKeeper, librdkafka's mock cluster), confluent-kafka produce and
consume loops, the raw loopback/sendfile ceilings, and table/JSON output.

Benchmarks, not tests: every figure in a script's table is the median of `--repeats` runs
(3 by default) with the spread (max-min)/median next to it, because the machine (2 cores,
shared) is noisy; every run is written to a results file of its own (`Results`).

What a run counts is decided by pure functions and small classes (`DeliveryCounter`,
`RateClock`, `median_of_runs`, `median_run`) that tests/unit/test_bench_counting.py checks
without a broker: a produce run counts only the records the brokers acknowledged, and a run
with any delivery error fails (`BenchFailure`: the script prints it and exits non-zero).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import statistics
import struct as _st
import sys
import tempfile
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CHUNK = 2000      # records per produce_batch call
MB = 1_000_000      # MB/s as Kafka's perf tools print it (10^6 bytes)
RESULTS = REPO / "bench" / "results"
MIN_RUNS = 3        # a figure that claims a target rests on the median of at least this many


# ---- machine -----------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    except OSError:
        pass
    import confluent_kafka
    return {"cpus": os.cpu_count(), "cpu": cpu, "mem_mb": mem, "kernel": platform.release(),
            "python": platform.python_version(),
            "librdkafka": confluent_kafka.libversion()[0],
            "loadavg_at_start": os.getloadavg(),
            "page_reporting": page_reporting()}


def loadavg() -> float:
    return os.getloadavg()[0]


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds_of(pid: int) -> float:
    """user+system CPU seconds of a process (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tck


# ---- statistics --------------------------------------------------------------------------

def median_of_runs(values: Sequence[float | None]) -> dict[str, Any]:
    """The figure a table shows for a cell: the median of its runs (None runs are ignored),
    with n, min, max and the spread (max-min)/median. `enough` says whether there were at
    least MIN_RUNS runs, the least a figure that claims a target may rest on."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "n": 0, "min": None, "max": None, "spread": None, "runs": [],
                "enough": False}
    med = statistics.median(vals)
    return {"median": med, "n": len(vals), "min": min(vals), "max": max(vals),
            "spread": (max(vals) - min(vals)) / med if med else 0.0, "runs": vals,
            "enough": len(vals) >= MIN_RUNS}


def median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The run whose `key` is the median of the runs' (the lower of the two middle runs when
    their number is even), so that every figure printed from it comes from one run: taking
    the best p50 of one run and the best p99 of another would mix runs."""
    ranked = sorted((r for r in runs if r.get(key) is not None), key=lambda r: r[key])
    if not ranked:
        return None
    return ranked[(len(ranked) - 1) // 2]


def runs_note(n: int) -> str:
    """What a table's figures rest on, in its heading."""
    if n >= MIN_RUNS:
        return f"median of {n} runs"
    return (f"median of {n} run{'s' if n != 1 else ''} (FEWER THAN {MIN_RUNS}: a smoke test, "
            f"no figure to claim a target with)")


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


# ---- counting ------------------------------------------------------------------------------

class BenchFailure(RuntimeError):
    """A run whose figures cannot be trusted: delivery errors, records never acknowledged,
    records lost on the way. `run_main` prints it and exits with status 1."""


class DeliveryCounter:
    """librdkafka's delivery reports of one producer, the only source of the count of
    records the brokers acknowledged.

    every=False (the throughput scripts' default): the producer is configured with
    `delivery.report.only.error=true` (`config()`), so only failed records come back, and
    once flush() has returned 0 every queued record has had its final report:
    acknowledged = queued - failed. every=True: every record is reported and counted as it
    comes (a Python call per record, about 0.4 us on this machine: 28 % of a 100 B run
    against the in-process mock), for checking the first mode.

    Pass the instance as `on_delivery` to every produce/produce_batch call of the records
    it counts; `settle()` then gives the count or raises BenchFailure."""

    def __init__(self, every: bool = False):
        self.every = every
        self.acked = 0
        self.failed = 0
        self.errors: dict[str, int] = {}

    def config(self) -> dict[str, Any]:
        return {"delivery.report.only.error": not self.every}

    def __call__(self, err: Any, msg: Any = None) -> None:
        if err is None:
            self.acked += 1
        else:
            self.failed += 1
            key = str(err)
            self.errors[key] = self.errors.get(key, 0) + 1

    def settle(self, queued: int, unflushed: int, what: str = "produce run") -> int:
        """The records acknowledged of `queued` ones, `unflushed` of which were still waiting
        when flush() returned; raises BenchFailure when any failed or was not acknowledged."""
        problems = []
        if self.failed:
            errs = "; ".join(f"{n} x {e}" for e, n in sorted(self.errors.items(),
                                                             key=lambda kv: -kv[1]))
            problems.append(f"{self.failed} of {queued} records failed delivery ({errs})")
        if unflushed:
            problems.append(f"{unflushed} of {queued} records still unacknowledged after flush()")
        if self.every and not problems and self.acked != queued:
            problems.append(f"{queued} records queued but {self.acked} acknowledged")
        if problems:
            raise BenchFailure(f"{what}: " + "; ".join(problems))
        return self.acked if self.every else queued - self.failed


class RateClock:
    """Records per second of a stream of received batches. The clock starts when the first
    batch is in (nothing earlier can start it: the consumer cannot tell when the broker began
    sending), so that batch's records are not counted in the rate; they count in `total`.
    Every later batch counts, up to the time the last one arrived."""

    def __init__(self) -> None:
        self.t0: float | None = None
        self.t_last: float | None = None
        self.first = 0
        self.timed = 0
        self.total = 0

    def add(self, n: int, now: float) -> None:
        if n <= 0:
            return
        self.total += n
        if self.t0 is None:
            self.t0 = self.t_last = now
            self.first = n
        else:
            self.timed += n
            self.t_last = now

    @property
    def seconds(self) -> float:
        return (self.t_last - self.t0) if self.t0 is not None and self.t_last is not None else 0.0

    @property
    def rate(self) -> float | None:
        """Records per second after the first batch; None when only one batch came."""
        return self.timed / self.seconds if self.seconds > 0 else None


def round_robin_keys(partitions: int) -> list[bytes]:
    """Short keys, one per partition: librdkafka's `consistent` partitioner (CRC-32 of the key
    modulo the partition count) puts a record with key i on partition i. confluent-kafka's
    produce_batch ignores a per-record "partition" (2.16.1: every record goes where the
    call's `partition` or the partitioner puts it), so a key is how one produce_batch call
    spreads its records over the partitions, in C."""
    keys: list[bytes | None] = [None] * partitions
    found, n = 0, 0
    while found < partitions:
        k = b"%x" % n
        i = zlib.crc32(k) % partitions
        if keys[i] is None:
            keys[i] = k
            found += 1
        n += 1
    return keys  # type: ignore[return-value]


def chunk_length(partitions: int, max_records: int, spread: str) -> int:
    """Records per produce_batch call: CHUNK; with the records spread one by one, a multiple
    of the partition count (at least one record each), so that every call starts again at
    partition 0 where the last one stopped."""
    n = CHUNK
    if spread == "record":
        n = max(partitions, CHUNK - CHUNK % partitions)
    return max(1, min(n, max_records))


def partition_sequence(partitions: int, records: int, max_records: int, spread: str) -> list[int]:
    """The partition of each of the first `records` records of a produce run (what
    produce_run asks librdkafka for): per record round-robin with spread="record", one
    CHUNK-record call after the other with spread="chunk"."""
    n = chunk_length(partitions, max_records, spread)
    out: list[int] = []
    call = 0
    while len(out) < records:
        if spread == "record":
            out.extend(i % partitions for i in range(n))
        else:
            out.extend([call % partitions] * n)
        call += 1
    return out[:records]


# ---- output --------------------------------------------------------------------------------

def print_table(headers: list[str], rows: list[list[Any]], file=sys.stdout) -> None:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = " | ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line, file=file)
    print("-+-".join("-" * w for w in widths), file=file)
    for r in cells:
        print(" | ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths)), file=file)
    file.flush()


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _numeric(s: str) -> bool:
    return bool(s) and (s[0].isdigit() or s[0] == "-" and len(s) > 1) and not s.startswith("--")


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(payload, f, indent=2, default=str)
        print(f"wrote {path}")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def add_results_args(ap: Any) -> None:
    """--results-dir / --label / --no-results, for every script that writes per-run files."""
    ap.add_argument("--results-dir", default=str(RESULTS),
                    help="each run goes to DIR/<benchmark>-<date>-<time>[-<label>]/<run>.json, "
                         "the medians to summary.json there (default bench/results)")
    ap.add_argument("--label", default="",
                    help="added to the run directory's name, e.g. before / after")
    ap.add_argument("--no-results", action="store_true", help="write no results files")


class Results:
    """The results files of one invocation: one JSON file per run (every figure of that run,
    the load average, the broker CPU seconds) and summary.json with the table's medians, in
    a directory of their own under --results-dir. A figure in docs/PERFORMANCE.md names its
    directory."""

    def __init__(self, benchmark: str, a: Any, info: dict[str, Any]):
        self.benchmark = benchmark
        self.args = {k: v for k, v in vars(a).items()}
        self.info = info
        self.dir: Path | None = None
        if not getattr(a, "no_results", False):
            name = f"{benchmark}-{time.strftime('%Y%m%d-%H%M%S')}"
            if getattr(a, "label", ""):
                name += f"-{a.label}"
            self.dir = Path(a.results_dir) / name
            self.dir.mkdir(parents=True, exist_ok=False)
            log(f"results: {self.dir}/")
        self.files: list[str] = []

    def run(self, name: str, payload: dict[str, Any]) -> str | None:
        """Write one run (as soon as it is done: a later failure does not lose it)."""
        if self.dir is None:
            return None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        path = self.dir / f"{safe}.json"
        with open(path, "w") as f:
            json.dump({"benchmark": self.benchmark, "run": name,
                       "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "args": self.args,
                       "machine": self.info, **payload}, f, indent=2, default=str)
        self.files.append(path.name)
        return str(path)

    def summary(self, payload: dict[str, Any]) -> str | None:
        if self.dir is None:
            return None
        path = self.dir / "summary.json"
        with open(path, "w") as f:
            json.dump({"benchmark": self.benchmark, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                       "args": self.args, "machine": self.info, "run_files": self.files,
                       **payload}, f, indent=2, default=str)
        print(f"wrote {path} (and {len(self.files)} run files)")
        return str(path)


def failures_status(failed: list[str]) -> int:
    """A script's exit status from the problems of its runs: 0, or 1 after listing them."""
    if not failed:
        return 0
    print(f"FAILED: {len(failed)} problem(s) in the runs above:", file=sys.stderr)
    for f in failed:
        print(f"  {f}", file=sys.stderr)
    return 1


def run_main(main: Callable[[], int]) -> None:
    """A script's entry point: a BenchFailure (delivery errors, unacknowledged or lost
    records) is printed as FAILED with its reason and the exit status is 1."""
    try:
        code = main()
    except BenchFailure as e:
        print(f"FAILED: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(code)


# ---- systems under test ----------------------------------------------------------------------

def use_broker_repo(path: str | None, info: dict[str, Any] | None = None) -> None:
    """Run strom brokers from another checkout (a git worktree of an older commit, for
    before/after tables): BrokerProcess starts `python -m broker` with that cwd/PYTHONPATH."""
    if path:
        import tests.support.broker_process as bp
        bp.REPO = Path(path).resolve()
        if info is not None:
            info["broker_repo"] = str(bp.REPO)


@contextmanager
def workdir(keep: bool = False, prefix: str = "strom-bench-") -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


class System:
    """Something to produce to and consume from: name, bootstrap, pids whose CPU we count."""

    name = "?"
    bootstrap = ""

    def pids(self) -> list[int]:
        return []

    def producer_extra(self) -> dict[str, Any]:
        return {}

    def create_topic(self, topic: str, partitions: int, rf: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)],
                                 operation_timeout=30)
        for f in fs.values():
            f.result(60)
        # Wait until every partition has a leader known to the metadata.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = admin.list_topics(topic, timeout=10).topics.get(topic)
            if md is not None and md.error is None and len(md.partitions) == partitions and \
                    all(p.leader >= 0 for p in md.partitions.values()):
                return
            time.sleep(0.1)
        raise TimeoutError(f"topic {topic} has no leaders")

    def close(self) -> None:
        pass


def plain_broker_processes() -> None:
    """Benchmarks start each broker as `python -m broker`, as a user does, not forked from
    the test suite's zygote: a forked broker starts its own session, so the kernel's
    autogroup scheduling gives each broker a share of the CPU of its own against the
    benchmark's clients, and the 50 MB/s latency tail measured ~40 % longer that way
    (docs/PERFORMANCE.md, "Decoded structs read through properties"). `--broker-repo`
    brokers were always plain processes: now both sides of a before/after are alike."""
    import tests.support.broker_process as bp
    bp.USE_ZYGOTE = False


class StromBroker(System):
    """One standalone strom broker (`python -m broker`) with its log on the local disk."""

    def __init__(self, wd: Path, overrides: dict[str, str] | None = None):
        from tests.support.broker_process import BrokerProcess
        plain_broker_processes()
        self.name = "strom-1"
        props = {"num.network.threads": "1", "auto.create.topics.enable": "false"}
        props.update(overrides or {})
        self.proc = BrokerProcess(wd / "strom-1", overrides=props).start()
        self.bootstrap = self.proc.bootstrap

    def pids(self) -> list[int]:
        assert self.proc.proc is not None
        return [self.proc.proc.pid]

    def close(self) -> None:
        self.proc.stop()


class StromCluster(System):
    """Three strom brokers and one real ZooKeeper (tests/support/cluster.py)."""

    def __init__(self, wd: Path, brokers: int = 3, overrides: dict[str, str] | None = None):
        from tests.support.cluster import Cluster
        plain_broker_processes()
        self.name = f"strom-{brokers}"
        self.cluster = Cluster(wd / "cluster", brokers=brokers,
                               overrides={"auto.create.topics.enable": "false",
                                          **(overrides or {})}).start()
        self.bootstrap = self.cluster.bootstrap

    def pids(self) -> list[int]:
        return [b.proc.pid for b in self.cluster.brokers if b.proc is not None]

    def close(self) -> None:
        self.cluster.stop()


class MockCluster(System):
    """librdkafka's in-memory mock cluster, made through librdkafka's C API (ctypes on the
    library bundled with confluent-kafka): `rd_kafka_mock_cluster_new` gives a real
    loopback listener per mock broker, and `rd_kafka_mock_topic_create` the partition count
    (the mock answers no CreateTopics). Its broker threads run inside this process."""

    def __init__(self, brokers: int = 1):
        import ctypes
        import glob

        import confluent_kafka
        libdir = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
        lib = ctypes.CDLL(glob.glob(str(libdir / "librdkafka*.so*"))[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        errstr = ctypes.create_string_buffer(512)
        self._lib = lib
        self._rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, 512)
        if not self._rk:
            raise RuntimeError(errstr.value.decode())
        self._mc = lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        self.name = f"mock-{brokers}"
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()

    def create_topic(self, topic: str, partitions: int, rf: int = 1) -> None:
        err = self._lib.rd_kafka_mock_topic_create(self._mc, topic.encode(), partitions, rf)
        if err:
            raise RuntimeError(f"rd_kafka_mock_topic_create: error {err}")

    def pids(self) -> list[int]:
        return [os.getpid()]   # the mock brokers are threads of this process

    def close(self) -> None:
        self._lib.rd_kafka_mock_cluster_destroy(self._mc)
        self._lib.rd_kafka_destroy(self._rk)


# ---- produce / consume with confluent-kafka ----------------------------------------------------

def producer_config(bootstrap: str, acks: str, compression: str, **extra: Any) -> dict[str, Any]:
    # The queue: 2M records lets 100 B runs keep the pipe full; 128 MiB holds 1 KiB runs
    # near what librdkafka's default 100,000-record cap gives them (Java: 32 MiB). With the
    # 1 GiB byte cap alone, a 1 KiB run against a broker slower than the mock keeps 1 GiB
    # of records queued in the client (docs/PERFORMANCE.md has both settings' figures).
    cfg = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": compression,
           "linger.ms": 5, "batch.size": 1_000_000, "batch.num.messages": 1_000_000,
           "queue.buffering.max.kbytes": 131_072, "queue.buffering.max.messages": 2_000_000,
           "message.max.bytes": 2_000_000, "log_level": 3}
    cfg.update(extra)
    return cfg


def make_values(record_size: int, compression: str) -> list[bytes]:
    """Payloads. Compressible but not trivially so when compressing (like log lines: ~2-3x
    with lz4), random otherwise (compression is off and the content does not matter)."""
    import random
    rnd = random.Random(42)
    if compression == "none":
        return [rnd.randbytes(record_size) for _ in range(64)]
    words = [b"GET", b"POST", b"/api/v1/orders", b"user", b"200", b"404", b"latency_ms",
             b"INFO", b"WARN", b"session", b"region=eu-west-1", b"trace"]
    out = []
    for _ in range(64):
        buf = bytearray()
        while len(buf) < record_size:
            buf += rnd.choice(words) + b" " + str(rnd.randint(0, 99999)).encode() + b" "
        out.append(bytes(buf[:record_size]))
    return out


def produce_run(bootstrap: str, topic: str, partitions: int, record_size: int, compression: str,
                acks: str, seconds: float, max_records: int, pids: list[int],
                spread: str = "chunk", every_report: bool = False,
                producer_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Produce as fast as confluent-kafka can for `seconds` (or `max_records`), then flush;
    the clock stops when flush() returns. `records` is what the brokers acknowledged
    (DeliveryCounter); a delivery error, or a record still unacknowledged after flush(),
    raises BenchFailure.

    spread="chunk": each produce_batch call (CHUNK records) goes to one partition, the next
    call to the next partition. spread="record": the records of every call go round-robin
    over all the partitions, one by one (a key per partition, `round_robin_keys`: a few bytes
    more per record, not counted in MB/s), so that every partition is active at once even
    when the partitions times CHUNK records would not fit the client's queue.
    `producer_extra`: more producer settings (e.g. enable.idempotence)."""
    from confluent_kafka import Producer
    if spread not in ("chunk", "record"):
        raise ValueError(f"spread must be chunk or record, not {spread!r}")
    warm = DeliveryCounter(every_report)
    counter = DeliveryCounter(every_report)
    extra: dict[str, Any] = {**counter.config(), **(producer_extra or {})}
    if spread == "record":
        extra["partitioner"] = "consistent"
    p = Producer(producer_config(bootstrap, acks, compression, **extra))
    values = make_values(record_size, compression)
    nv = len(values)

    # Warm up: connections and metadata before the clock starts.
    for part in range(partitions):
        p.produce(topic, values[0], partition=part, on_delivery=warm)
    warm.settle(partitions, p.flush(30), "warm-up")
    cpu0 = {pid: cpu_seconds_of(pid) for pid in pids}
    sent = 0
    # produce_batch: one Python call queues a chunk of records (librdkafka copies each value),
    # so the driver's own per-record Python cost does not hide the broker's.
    chunk_len = chunk_length(partitions, max_records, spread)
    if spread == "record":
        keys = round_robin_keys(partitions)
        template = [{"value": values[i % nv], "key": keys[i % partitions]} for i in range(chunk_len)]
    else:
        template = [{"value": values[i % nv]} for i in range(chunk_len)]
    chunk = [dict(m) for m in template]
    produce_batch = p.produce_batch
    poll = p.poll
    t0 = time.perf_counter()
    deadline = t0 + seconds
    part = 0
    full = 0
    spin = os.environ.get("BENCH_SPIN") == "1"
    while sent < max_records and time.perf_counter() < deadline:
        if spread == "record":
            n = produce_batch(topic, chunk, on_delivery=counter)
        else:
            n = produce_batch(topic, chunk, partition=part, on_delivery=counter)
            part += 1
            if part == partitions:
                part = 0
        sent += n
        if n < len(chunk):
            # Queue full: the rest carry '_error' and were not queued (not counted: `sent` is
            # what produce_batch queued); wait, and go on with fresh dicts. With spread=record
            # the next call starts at partition 0 again: a partition or two get a few records
            # less now and then, not a partition left out.
            full += 1
            chunk = [dict(m) for m in template]
            if spin:
                poll(0.005)
            else:
                # Wait for room for a whole chunk: retrying at once would fail most of it
                # again and burn the CPU the broker under test needs (2 shared cores).
                room_at = max(len(p) // 2, len(p) - chunk_len)
                while len(p) > room_at and time.perf_counter() < deadline:
                    poll(0.005)
        else:
            poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = {pid: cpu_seconds_of(pid) - cpu0[pid] for pid in pids}
    acked = counter.settle(sent, left, f"produce to {topic}")
    return {"records": acked, "queued": sent, "seconds": elapsed,
            "records_per_s": acked / elapsed, "mb_per_s": acked * record_size / elapsed / MB,
            "delivery_errors": counter.failed, "unacknowledged": left,
            "delivery_reports": "every record" if every_report else "errors only",
            "spread": spread, "queue_full": full, "server_cpu_s": sum(cpu.values())}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Every partition's end offset (one ListOffsets through confluent-kafka's AdminClient)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    fs = admin.list_offsets({TopicPartition(topic, i): OffsetSpec.latest() for i in range(partitions)},
                            request_timeout=30)
    ends = [0] * partitions
    for tp, f in fs.items():
        ends[tp.partition] = f.result().offset
    return ends


def spread_check(before: list[int], after: list[int]) -> dict[str, Any]:
    """What a produce run put on each partition (end offsets after minus before): how many
    partitions got records, and the least and most any got."""
    got = [b - a for a, b in zip(before, after)]
    return {"partitions_written": sum(1 for g in got if g > 0), "partitions": len(got),
            "min_records": min(got) if got else 0, "max_records": max(got) if got else 0}


def consume_run(bootstrap: str, topic: str, partitions: int, expected: int | None, record_size: int,
                pids: list[int], timeout: float = 120.0) -> dict[str, Any]:
    """Read `expected` records from the start of every partition with confluent-kafka
    (assign, no group management). The rate is RateClock's: the clock starts when the first
    batch is in, and the records counted are those received after it, up to the last.

    `expected=None`: everything between the partitions' watermarks (the mock cluster keeps
    only the last ~5 MB / 100,000 records of each partition, so its consume ceiling reads
    what it retained of a many-partition topic)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                  "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 1_048_576,
                  "fetch.message.max.bytes": 10_485_760, "log_level": 3})
    if expected is None:
        marks = [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10) for i in range(partitions)]
        expected = sum(hi - lo for lo, hi in marks)
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
    clock = RateClock()
    cpu0: dict[int, float] | None = None
    deadline = time.monotonic() + timeout
    consume = c.consume
    now = time.perf_counter
    while clock.total < expected and time.monotonic() < deadline:
        msgs = consume(num_messages=100_000, timeout=1.0)
        if not msgs:
            continue
        t = now()
        # Errors (none expected: partition EOF events are off) are rare; check the list
        # only when its last entry is one, to keep the per-record Python cost out.
        if msgs[-1].error() is None and msgs[0].error() is None:
            n = len(msgs)
        else:
            n = sum(1 for m in msgs if m.error() is None)
        clock.add(n, t)
        if cpu0 is None and clock.t0 is not None:
            cpu0 = {pid: cpu_seconds_of(pid) for pid in pids}
    cpu = {pid: cpu_seconds_of(pid) - (cpu0 or {}).get(pid, 0.0) for pid in pids} if cpu0 else {}
    c.close()
    if clock.total < expected:
        raise BenchFailure(f"consumed {clock.total} of {expected} records of {topic} in {timeout}s")
    rate = clock.rate
    return {"records": clock.total, "timed_records": clock.timed, "first_batch": clock.first,
            "seconds": clock.seconds, "records_per_s": rate,
            "mb_per_s": rate * record_size / MB if rate is not None else None,
            "server_cpu_s": sum(cpu.values())}


# ---- raw ceilings -------------------------------------------------------------------------------

def _reader(conn: socket.socket, total: int, out: dict[str, Any]) -> None:
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            break
        got += n
    out["got"] = got
    out["t_end"] = time.perf_counter()
    conn.close()


def _pair(total: int) -> tuple[socket.socket, dict[str, Any], threading.Thread]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    out: dict[str, Any] = {}
    s = socket.create_connection(listener.getsockname())
    conn, _ = listener.accept()
    listener.close()
    t = threading.Thread(target=_reader, args=(conn, total, out), daemon=True)
    t.start()
    return s, out, t


def loopback_ceiling(total: int = 2 << 30) -> float:
    """MB/s of sendall(1 MiB) -> recv_into(1 MiB) over loopback TCP, Python at both ends."""
    s, out, t = _pair(total)
    chunk = memoryview(os.urandom(1 << 20))
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        s.sendall(chunk)
        sent += len(chunk)
    s.shutdown(socket.SHUT_WR)
    t.join()
    s.close()
    return out["got"] / (out["t_end"] - t0) / MB


def sendfile_ceiling(wd: Path, total: int = 1 << 30) -> float:
    """MB/s of os.sendfile from a page-cached file to a loopback socket read by Python."""
    path = wd / "sendfile.bin"
    with open(path, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(total >> 20):
            f.write(block)
    with open(path, "rb") as f:      # into the page cache
        while f.read(8 << 20):
            pass
    s, out, t = _pair(total)
    fd = os.open(path, os.O_RDONLY)
    t0 = time.perf_counter()
    off = 0
    while off < total:
        off += os.sendfile(s.fileno(), fd, off, total - off)
    s.shutdown(socket.SHUT_WR)
    t.join()
    s.close()
    os.close(fd)
    path.unlink()
    return out["got"] / (out["t_end"] - t0) / MB


def page_cache_append_ceiling(wd: Path, total: int = 2 << 30) -> dict[str, float]:
    """os.write of 1 MiB blocks appended to a new file on the log disk: what storing new
    bytes in the page cache costs this machine (MB/s of one thread and CPU ms per MB).

    Every produced byte costs a broker this much, whatever it is written in. On this VM it
    varies a lot: free guest memory is handed back to the host (virtio-balloon free page
    reporting), so a page cache page that is new to the guest costs a host-side fault."""
    path = wd / "append.bin"
    block = memoryview(os.urandom(1 << 20))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(total >> 20):
            os.write(fd, block)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        os.close(fd)
        path.unlink()
    return {"mb_per_s": total / wall / MB, "cpu_ms_per_mb": cpu * 1000 / (total / MB)}


def meminfo_mb() -> dict[str, int]:
    """/proc/meminfo in MiB."""
    out: dict[str, int] = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            out[key] = int(rest.split()[0]) // 1024
    return out


class PageCacheFill:
    """Keeps this machine's free memory full of clean page cache, as on a host that has run
    a broker (or anything else) for a while: a new page-cache page then comes from
    reclaiming an old one. On this VM, memory that stays free for a few seconds is handed
    back to the host (free page reporting), and a page written into it costs a host-side
    fault: appending costs 1.5-2.5 ms of CPU per MB instead of 0.2-0.5
    (bench/page_cache_reuse.py). Without this, every produce run measures that.

    The ballast is files of zeros in `dir`, about the size of the RAM, written and fsynced
    once (clean pages, which reclaim drops without writeback). `top_up()` reads them back
    in a cycle from where it last stopped, which is where reclaim evicted first, until free
    memory stops falling. Deleting ballast would free its cached pages, so none is deleted
    before `close()`."""

    FILE = 64 << 20
    BLOCK = 16 << 20

    def __init__(self, dir: Path, leave_free_mb: int = 256):
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.leave_free_mb = leave_free_mb
        self.size = meminfo_mb()["MemTotal"] << 20
        free_disk = shutil.disk_usage(self.dir).free
        if free_disk < self.size + (16 << 30):
            raise SystemExit(f"--page-cache full needs {(self.size + (16 << 30)) >> 30} GiB free "
                             f"on {self.dir}'s disk, it has {free_disk >> 30} GiB")
        self.files: list[Path] = []
        self.cursor = 0
        self.buf = bytearray(self.BLOCK)
        self.target_mb = leave_free_mb

    def _room(self) -> bool:
        return meminfo_mb()["MemFree"] > self.target_mb

    def _write_ballast(self) -> int:
        block, written = bytes(self.BLOCK), 0
        while written < self.size:
            path = self.dir / f"ballast-{len(self.files):06d}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                for _ in range(self.FILE // self.BLOCK):
                    written += os.write(fd, block)
                os.fsync(fd)
            finally:
                os.close(fd)
            self.files.append(path)
        return written

    def _read_next(self) -> int:
        path = self.files[self.cursor]
        self.cursor = (self.cursor + 1) % len(self.files)
        n = 0
        with open(path, "rb", buffering=0) as f:
            while (got := f.readinto(self.buf)):
                n += got
        return n

    def top_up(self) -> dict[str, float]:
        """Bring ballast back into the page cache until free memory is down to where the
        first fill left it (the kernel keeps some memory free in zones that other
        allocations may need) or the whole ballast was read once; what it took."""
        t0 = time.perf_counter()
        written = moved = 0
        if not self.files:
            written = self._write_ballast()
            # Read on until free memory stops falling: that level is what a full page
            # cache looks like on this machine, the goal of every later top-up.
            window = 1 << 30
            samples = [(0, meminfo_mb()["MemFree"])]
            while self._room() and moved < self.size:
                moved += self._read_next()
                samples.append((moved, meminfo_mb()["MemFree"]))
                past = [f for m, f in samples if m <= moved - window]
                if past and past[-1] - samples[-1][1] < (window >> 20) // 4:
                    break
            self.target_mb = max(self.leave_free_mb, meminfo_mb()["MemFree"] + 256)
        while self._room() and moved < self.size:
            moved += self._read_next()
        return {"written_mb": written / MB, "read_mb": moved / MB,
                "seconds": time.perf_counter() - t0, "mem_free_mb": meminfo_mb()["MemFree"],
                "target_free_mb": self.target_mb}

    def close(self) -> None:
        for path in self.files:
            path.unlink(missing_ok=True)
        self.files.clear()


def page_reporting() -> dict[str, str]:
    """The guest's free page reporting settings (why new memory is slow on this VM)."""
    d = Path("/sys/module/page_reporting/parameters")
    out: dict[str, str] = {}
    if d.is_dir():
        for f in sorted(d.iterdir()):
            try:
                out[f.name] = f.read_text().strip()
            except OSError:
                pass
    return out


# ---- a raw Fetch reader: per-batch work only --------------------------------------------------

_U64 = _st.Struct(">q").unpack_from
_U32 = _st.Struct(">i").unpack_from


def count_batch_records(recs: bytes | None) -> tuple[int, int]:
    """Records in a fetched partition's whole batches (a partial one at the end is not
    counted) and the offset after the last of them (-1: no whole batch), read from the
    RecordBatch v2 headers only: records are never decoded."""
    if not recs:
        return 0, -1
    mv = memoryview(recs)
    pos, n, got, last = 0, len(mv), 0, -1
    while pos + 61 <= n:
        length = _U32(mv, pos + 8)[0]
        if pos + 12 + length > n:
            break                   # a partial batch at the end of the response
        got += _U32(mv, pos + 57)[0]
        last = _U64(mv, pos)[0] + _U32(mv, pos + 23)[0]
        pos += 12 + length
    return got, (last + 1 if last >= 0 else -1)


def raw_fetch_run(bootstrap: str, topic: str, partitions: int, expected: int | None,
                  record_size: int, pids: list[int], timeout: float = 120.0,
                  partition_max_bytes: int = 8 << 20, version: int = 5) -> dict[str, Any]:
    """Read every partition from the start with Fetch requests on one connection to the
    (single) broker, counting records from the batch headers (recordsCount) without decoding
    them. confluent-kafka's consumer tops out near 200k records/s on this machine whatever
    the broker (it makes a Python object per record), so this reader is what shows how fast
    a broker serves fetches. `expected=None`: up to the high watermarks seen on the first
    response (the mock cluster keeps only the tail of each partition: it starts at the
    log start offset given in ListOffsets-free fashion by an OFFSET_OUT_OF_RANGE retry)."""

    from clients.protocol.headers import RequestHeader, decode_response_header, encode_request_header
    from clients.protocol.messages import api
    from clients.protocol.types import Reader, Writer

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fetch = api("Fetch")
    offsets = {p: 0 for p in range(partitions)}
    buf = bytearray(64 << 20)
    view = memoryview(buf)
    size4 = _st.Struct(">i")
    cid = 0

    def call(body: dict) -> Any:
        nonlocal cid
        cid += 1
        w = Writer()
        encode_request_header(w, RequestHeader(fetch.key, version, cid, "bench"),
                              fetch.request_header_version(version))
        fetch.encode_request(body, version, w)
        payload = w.getvalue()
        sock.sendall(size4.pack(len(payload)) + payload)
        got = 0
        while got < 4:
            got += sock.recv_into(view[got:4])
        n = size4.unpack_from(buf)[0]
        got = 0
        while got < n:
            k = sock.recv_into(view[got:n])
            if not k:
                raise ConnectionError("broker closed the connection")
            got += k
        r = Reader(view[:n])
        decode_response_header(r, fetch.response_header_version(version))
        return fetch.decode_response(r, version)

    def body(max_wait: int) -> dict:
        return {"replica_id": -1, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": 60 << 20,
                "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "fetch_offset": o, "log_start_offset": -1,
                     "partition_max_bytes": partition_max_bytes} for p, o in offsets.items()]}]}

    # First round: find the start (log start offset after OUT_OF_RANGE) and the ends.
    ends: dict[int, int] = {}
    for _ in range(3):
        resp = call(body(0))
        retry = False
        for t in resp.responses:
            for pr in t.partitions:
                ends[pr.partition_index] = pr.high_watermark
                if pr.error_code == 1:          # OFFSET_OUT_OF_RANGE: start at the log start
                    offsets[pr.partition_index] = max(0, pr.log_start_offset)
                    retry = True
        if not retry:
            break
    if expected is None:
        expected = sum(ends[p] - offsets[p] for p in offsets)
    got = 0
    cpu0 = {pid: cpu_seconds_of(pid) for pid in pids}
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    while got < expected and time.monotonic() < deadline:
        resp = call(body(100))
        for t in resp.responses:
            for pr in t.partitions:
                count, next_offset = count_batch_records(pr.records)
                got += count
                if next_offset >= 0:
                    offsets[pr.partition_index] = next_offset
    elapsed = time.perf_counter() - t0
    cpu = {pid: cpu_seconds_of(pid) - cpu0[pid] for pid in pids}
    sock.close()
    if got < expected:
        raise BenchFailure(f"raw fetch read {got} of {expected} records in {timeout}s")
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed,
            "mb_per_s": got * record_size / elapsed / MB, "server_cpu_s": sum(cpu.values())}
