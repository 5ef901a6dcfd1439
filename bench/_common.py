"""Shared by the bench/ scripts: the systems under test (a standalone strom broker, a 3-broker
strom cluster on a real ZooKeeper, librdkafka's mock cluster), confluent-kafka produce and
consume loops, the raw loopback/sendfile ceilings, and table/JSON output.

Benchmarks, not tests: every figure is the best of `repeats` runs with the spread
(max-min)/best next to it, because the machine (2 cores, shared) is noisy.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CHUNK = 2000      # records per produce_batch call
MB = 1_000_000      # MB/s as Kafka's perf tools print it (10^6 bytes)


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

def best_and_spread(values: list[float], higher_is_better: bool = True) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"best": None, "spread": None, "runs": values}
    best = max(vals) if higher_is_better else min(vals)
    spread = (max(vals) - min(vals)) / best if best else 0.0
    return {"best": best, "spread": spread, "median": statistics.median(vals), "runs": vals}


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


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


class StromBroker(System):
    """One standalone strom broker (`python -m broker`) with its log on the local disk."""

    def __init__(self, wd: Path, overrides: dict[str, str] | None = None):
        from tests.support.broker_process import BrokerProcess
        self.name = "strom-1"
        props = {"num.network.threads": "1", "auto.create.topics.enable": "false"}
        props.update(overrides or {})
        self.proc = BrokerProcess(wd / "strom-1", overrides=props).start()
        self.bootstrap = self.proc.bootstrap

    def pids(self) -> list[int]:
        return [self.proc.proc.pid]

    def close(self) -> None:
        self.proc.stop()


class StromCluster(System):
    """Three strom brokers and one real ZooKeeper (tests/support/cluster.py)."""

    def __init__(self, wd: Path, brokers: int = 3):
        from tests.support.cluster import Cluster
        self.name = f"strom-{brokers}"
        self.cluster = Cluster(wd / "cluster", brokers=brokers,
                               overrides={"auto.create.topics.enable": "false"}).start()
        self.bootstrap = self.cluster.bootstrap

    def pids(self) -> list[int]:
        return [b.proc.pid for b in self.cluster.brokers]

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
                acks: str, seconds: float, max_records: int, pids: list[int]) -> dict[str, Any]:
    """Produce as fast as confluent-kafka can for `seconds` (or `max_records`), then flush.
    Records are spread round-robin over the partitions (explicit partition numbers)."""
    from confluent_kafka import Producer
    p = Producer(producer_config(bootstrap, acks, compression))
    values = make_values(record_size, compression)
    nv = len(values)
    errors = [0]

    def on_delivery(err, msg):      # only set on failures path below (per-message cb is costly)
        if err is not None:
            errors[0] += 1

    # Warm up: connections and metadata before the clock starts.
    for part in range(partitions):
        p.produce(topic, values[0], partition=part, on_delivery=on_delivery)
    p.flush(30)
    cpu0 = {pid: cpu_seconds_of(pid) for pid in pids}
    sent = 0
    # produce_batch: one Python call queues CHUNK records (librdkafka copies each value), so
    # the driver's own per-record Python cost does not hide the broker's.
    chunk_len = max(1, min(CHUNK, max_records))
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
        n = produce_batch(topic, chunk, partition=part)
        sent += n
        if n < len(chunk):          # queue full: the rest carry '_error'; wait, use fresh dicts
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
        part += 1
        if part == partitions:
            part = 0
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = {pid: cpu_seconds_of(pid) - cpu0[pid] for pid in pids}
    if left:
        raise RuntimeError(f"{left} records still unacknowledged after flush")
    return {"records": sent, "seconds": elapsed, "records_per_s": sent / elapsed,
            "mb_per_s": sent * record_size / elapsed / MB, "errors": errors[0], "queue_full": full,
            "server_cpu_s": sum(cpu.values())}


def consume_run(bootstrap: str, topic: str, partitions: int, expected: int | None, record_size: int,
                pids: list[int], timeout: float = 120.0) -> dict[str, Any]:
    """Read `expected` records from the start of every partition with confluent-kafka
    (assign, no group management), timing from the first record to the last.

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
    got = 0
    t0 = None
    cpu0 = {pid: cpu_seconds_of(pid) for pid in pids}
    deadline = time.monotonic() + timeout
    consume = c.consume
    while got < expected and time.monotonic() < deadline:
        msgs = consume(num_messages=100_000, timeout=1.0)
        if not msgs:
            continue
        if t0 is None:
            t0 = time.perf_counter()
            cpu0 = {pid: cpu_seconds_of(pid) for pid in pids}
        # Errors (none expected: partition EOF events are off) are rare; check the list
        # only when its last entry is one, to keep the per-record Python cost out.
        if msgs[-1].error() is None and msgs[0].error() is None:
            got += len(msgs)
        else:
            got += sum(1 for m in msgs if m.error() is None)
    elapsed = time.perf_counter() - (t0 or time.perf_counter())
    cpu = {pid: cpu_seconds_of(pid) - cpu0[pid] for pid in pids}
    c.close()
    if got < expected:
        raise RuntimeError(f"consumed {got} of {expected} records in {timeout}s")
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed if elapsed else 0.0,
            "mb_per_s": got * record_size / elapsed / MB if elapsed else 0.0,
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


def repeat(fn: Callable[[], Any], n: int) -> list[Any]:
    return [fn() for _ in range(n)]


# ---- a raw Fetch reader: per-batch work only --------------------------------------------------

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
    import struct as _st

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
    u64 = _st.Struct(">q").unpack_from
    u32 = _st.Struct(">i").unpack_from
    while got < expected and time.monotonic() < deadline:
        resp = call(body(100))
        for t in resp.responses:
            for pr in t.partitions:
                recs = pr.records
                if not recs:
                    continue
                mv = memoryview(recs)
                pos, n = 0, len(mv)
                last = -1
                while pos + 61 <= n:
                    length = u32(mv, pos + 8)[0]
                    if pos + 12 + length > n:
                        break                   # a partial batch at the end of the response
                    got += u32(mv, pos + 57)[0]
                    last = u64(mv, pos)[0] + u32(mv, pos + 23)[0]
                    pos += 12 + length
                if last >= 0:
                    offsets[pr.partition_index] = last + 1
    elapsed = time.perf_counter() - t0
    cpu = {pid: cpu_seconds_of(pid) - cpu0[pid] for pid in pids}
    sock.close()
    if got < expected:
        raise RuntimeError(f"raw fetch read {got} of {expected} records in {timeout}s")
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed,
            "mb_per_s": got * record_size / elapsed / MB, "server_cpu_s": sum(cpu.values())}
