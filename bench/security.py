"""Produce and consume throughput over TLS (SSL) and SASL_SSL against PLAINTEXT, in the same
run, with confluent-kafka (librdkafka) against one standalone strom broker that has the
three listeners at once.

    .venv/bin/python bench/security.py                 # 3 rounds of 1,024 MB per listener, ~2 min
    .venv/bin/python bench/security.py --quick         # 1 round of 128 MB (a smoke test)
    .venv/bin/python bench/security.py --megabytes 256 --partitions 1 --label p1

The broker: `listeners=PLAINTEXT://...,SSL://...,SASL_SSL://...` (tests/support/security.py's
`secure_overrides`: certificates from a CA made for the run, TLSv1.2-1.3 as Kafka's default,
the SSL listener asking for a client certificate, SASL_SSL accepting PLAIN and SCRAM), no
authorizer, one network thread as bench/produce_consume.py's strom-1. The SASL_SSL client
logs in as "alice" with --sasl-mechanism (SCRAM-SHA-512 by default; the user's credential is
created with AlterUserScramCredentials over PLAINTEXT before the first run); the SSL client
presents alice's certificate.

Every repeat is a round over the listeners, one after the other, rotated by one each round
(PLAINTEXT, SSL, SASL_SSL; then SSL, SASL_SSL, PLAINTEXT; then SASL_SSL, PLAINTEXT, SSL), so
that drift, within a round and across rounds, hits them all alike (`--order fixed` keeps the
first order). Each listener in a round gets a fresh topic of --partitions partitions, and:

1. produce: --megabytes MB of --record-size records (random bytes, no compression) with
   `_common.produce_run` (the produce benchmarks' producer: linger.ms=5, batch.size=1000000,
   the 128 MiB queue, produce_batch calls of 2,000 records, each call to the next partition),
   acks=--acks (1 by default, as strom-1 in bench/produce_consume.py). Connections, the TLS
   handshake and the SASL login happen in the warm-up, before the clock. Counted: the
   records the broker acknowledged; the clock stops when flush() returns; a delivery error
   or a record left unacknowledged fails the run.
2. consume: the same listener's consumer reads the whole topic back (the acknowledged
   records plus the warm-up's one per partition) from the page cache, `assign()`ed, with
   the consume benchmark's settings except two (`consume_all`: librdkafka's 1 s fetch-queue
   back-off, which paused the PLAINTEXT consumer and not the TLS ones, is 10 ms; the last
   consume() call does not wait out its timeout inside the clock); timed from its first
   batch (`RateClock`: that batch is not counted in the rate). Fewer records than expected
   fails the run. The consumer makes a Python object per record in this process, so its
   figure is the client's as much as the broker's;
3. raw fetch: the broker's read path, as `_common.raw_fetch_run` (strom-1's "fetch" in
   bench/produce_consume.py): Fetch v5 requests for all the partitions on one connection
   from Python, through TLS and the SASL login where the listener asks for them, records
   counted from the batch headers without decoding them; it must get every record.

Each run also records the broker's user and system CPU (ms per MB in the table: TLS's work
is user time, the page-cache writes and the faults of new memory are system time) and this
process's CPU (the client's: librdkafka encrypts and decrypts here, on the same 2 cores). "ratio" is each
run's MB/s over the PLAINTEXT run of the same round; the table shows the median of those
per-round ratios. Every run is written to bench/results/security-<date>-<time>[-<label>]/
as it finishes, the medians to summary.json there; a failure prints `FAILED: <why>` and
exits with status 1.
"""
from __future__ import annotations

import argparse
import os
import socket
import ssl
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (MB, BenchFailure, RateClock, Results, StromBroker,  # noqa: E402
                           count_batch_records,
                           add_results_args, loadavg, log, machine,
                           median_of_runs, print_table, produce_run, run_main, runs_note,
                           use_broker_repo, workdir, write_json)
from tests.support.broker_process import free_port, wait_for_port  # noqa: E402
from tests.support.security import USERS, SecurityKit, secure_overrides  # noqa: E402

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
PHASES = ("produce", "consume", "fetch")
USER = "alice"
SCRAM_ITERATIONS = 4096


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listeners", default=",".join(LISTENERS),
                    help="comma list of PLAINTEXT, SSL, SASL_SSL: the first round's order "
                         "(ratios need PLAINTEXT)")
    ap.add_argument("--megabytes", type=float, default=1024.0,
                    help="MB (10^6 bytes) of records produced, then consumed, per run")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--acks", default="1", choices=["0", "1", "all"])
    ap.add_argument("--order", default="rotate", choices=["rotate", "fixed"],
                    help="rotate (default): round r starts at the r-th listener (PLAINTEXT, SSL, "
                         "SASL_SSL; then SSL, SASL_SSL, PLAINTEXT; ...); fixed: --listeners' "
                         "order in every round")
    ap.add_argument("--sasl-mechanism", default="SCRAM-SHA-512",
                    choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    ap.add_argument("--repeats", type=int, default=3,
                    help="rounds over the listeners; the table shows medians (3 at least for a "
                         "figure to claim anything with)")
    ap.add_argument("--max-seconds", type=float, default=120.0,
                    help="a produce run stops after this long even short of --megabytes")
    ap.add_argument("--quick", action="store_true", help="1 round of 128 MB (a smoke test)")
    ap.add_argument("--broker-repo", metavar="DIR",
                    help="run the strom broker from this checkout (before/after comparisons)")
    ap.add_argument("--json", help="also write the summary (every run and the medians) to this file")
    add_results_args(ap)
    a = ap.parse_args(argv)
    if a.quick:
        a.repeats, a.megabytes = 1, 128.0
    a.listener_list = [x.strip() for x in a.listeners.split(",") if x.strip()]
    unknown = set(a.listener_list) - set(LISTENERS)
    if unknown:
        ap.error(f"unknown listeners {sorted(unknown)}: PLAINTEXT, SSL or SASL_SSL")
    return a


class SecureBroker:
    """One strom broker with a PLAINTEXT, an SSL and a SASL_SSL listener; `client(listener)`
    gives librdkafka's settings for a client of that listener (bootstrap included)."""

    def __init__(self, wd: Path, mechanism: str):
        self.kit = SecurityKit(wd / "certs")
        self.mechanism = mechanism
        ports: dict[str, Any] = {"PLAINTEXT": "{port}", "SSL": free_port(), "SASL_SSL": free_port()}
        props = secure_overrides(self.kit, ports, inter_broker="PLAINTEXT")
        self.broker = StromBroker(wd, overrides=props)
        self.ports = {"PLAINTEXT": self.broker.proc.port, "SSL": ports["SSL"],
                      "SASL_SSL": ports["SASL_SSL"]}
        try:
            for port in self.ports.values():
                wait_for_port("127.0.0.1", port, 20.0, self.broker.proc.proc)
        except Exception:
            self.broker.close()
            raise
        self.properties = props

    def pids(self) -> list[int]:
        return self.broker.pids()

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(self, listener: str) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener),
                                "security.protocol": listener}
        if listener in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(self.kit.ca_pem)
        if listener == "SSL":
            conf["ssl.certificate.location"] = str(self.kit.cert_pem(USER))
            conf["ssl.key.location"] = str(self.kit.key_pem(USER))
        if listener == "SASL_SSL":
            conf.update({"sasl.mechanisms": self.mechanism, "sasl.username": USER,
                         "sasl.password": USERS[USER]})
        return conf

    def create_topic(self, topic: str, partitions: int) -> None:
        self.broker.create_topic(topic, partitions, 1)     # over PLAINTEXT

    def add_scram_user(self) -> None:
        """alice's SCRAM credential for --sasl-mechanism (PLAIN users are in the JAAS)."""
        if not self.mechanism.startswith("SCRAM-"):
            return
        from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)
        mech = getattr(ScramMechanism, self.mechanism.replace("-", "_"))
        admin = AdminClient({"bootstrap.servers": self.bootstrap("PLAINTEXT"), "log_level": 3})
        upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(mech, SCRAM_ITERATIONS),
                                              USERS[USER].encode())
        for f in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
            f.result(60)

    def check_login(self, listener: str, timeout: float = 20.0) -> None:
        """A metadata request through the listener, retried until the login works (the
        credential is in force) or `timeout`."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({**self.client(listener), "log_level": 0})
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                admin.list_topics(timeout=5)
                return
            except Exception as e:      # KafkaException: authentication or transport
                last = e
                time.sleep(0.5)
        raise BenchFailure(f"cannot use the {listener} listener: {last}")

    def close(self) -> None:
        self.broker.close()


def tls_probe(broker: SecureBroker, listener: str) -> dict[str, Any]:
    """The TLS version and cipher the broker settles on with a Python (OpenSSL) client that
    offers the defaults, as librdkafka does (outside the clock; what librdkafka itself
    negotiated is not visible from here)."""
    ctx = ssl.create_default_context(cafile=str(broker.kit.ca_pem))
    ctx.load_cert_chain(str(broker.kit.cert_pem(USER)), str(broker.kit.key_pem(USER)))
    with socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            cipher = s.cipher()
            return {"version": s.version(), "cipher": cipher[0] if cipher else None,
                    "bits": cipher[2] if cipher else None}


# librdkafka's default (1000 ms) stops fetching a partition for a whole second whenever its
# local queue holds more than queued.min.messages (100,000): a consumer whose broker answers
# fast (PLAINTEXT, sendfile) sat idle ~1 s per 200,000 records, one over TLS (slower
# answers, the queue seldom full) did not, and came out faster. Resuming at once measures
# the listeners rather than that back-off.
FETCH_QUEUE_BACKOFF_MS = 10


def consume_all(client: dict[str, Any], topic: str, partitions: int, expected: int,
                record_size: int, pids: list[int], timeout: float = 120.0) -> dict[str, Any]:
    """`_common.consume_run` with the listener's security settings (it takes none), and two
    differences: fetch.queue.backoff.ms (above), and the last consume() call asks for only
    the records still to come, so the clock stops when the last one is in (asking for a
    full 100,000 made that call wait out its 1 s timeout, a second inside the measured
    time). Reads `expected` records from the start of every partition (assign, no group),
    timed from the first batch (RateClock)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({**client, "group.id": f"bench-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                  "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 1_048_576,
                  "fetch.message.max.bytes": 10_485_760,
                  "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, "log_level": 3})
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
    clock = RateClock()
    meter = CpuMeter(pids)
    deadline = time.monotonic() + timeout
    consume = c.consume
    now = time.perf_counter
    while clock.total < expected and time.monotonic() < deadline:
        msgs = consume(num_messages=min(100_000, expected - clock.total), timeout=1.0)
        if not msgs:
            continue
        t = now()
        if msgs[-1].error() is None and msgs[0].error() is None:
            n = len(msgs)
        else:
            n = sum(1 for m in msgs if m.error() is None)
        clock.add(n, t)
        if meter.t0 is None and clock.t0 is not None:
            meter.start()
    cpu = meter.read(clock.timed * record_size / MB)
    c.close()
    if clock.total < expected:
        raise BenchFailure(f"consumed {clock.total:,} of {expected:,} records of {topic} in "
                           f"{timeout:.0f} s")
    rate = clock.rate
    return {"records": clock.total, "timed_records": clock.timed, "first_batch": clock.first,
            "seconds": clock.seconds, "records_per_s": rate,
            "mb_per_s": rate * record_size / MB if rate is not None else None, **cpu}


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process (/proc/PID/stat): TLS's work (OpenSSL, the
    event loop's TLS transport) is user time; the page-cache copies and the faults of new
    memory are system time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


class CpuMeter:
    """The broker's user and system CPU and this process's (the client's) CPU from start()
    to read(), per MB moved."""

    def __init__(self, broker_pids: list[int]):
        self.pids = broker_pids
        self.me = os.getpid()
        self.t0: dict[int, tuple[float, float]] | None = None

    def start(self) -> None:
        self.t0 = {pid: cpu_times(pid) for pid in [*self.pids, self.me]}

    def read(self, mb: float) -> dict[str, float | None]:
        t0 = self.t0 or {}
        user = sys_ = client = 0.0
        for pid, (u0, s0) in t0.items():
            u, s = cpu_times(pid)
            if pid == self.me:
                client += (u - u0) + (s - s0)
            else:
                user += u - u0
                sys_ += s - s0

        def per_mb(x: float) -> float | None:
            return x * 1000 / mb if mb and t0 else None
        return {"server_cpu_s": user + sys_, "server_user_s": user, "server_sys_s": sys_,
                "client_cpu_s": client, "server_cpu_ms_per_mb": per_mb(user + sys_),
                "server_user_ms_per_mb": per_mb(user), "server_sys_ms_per_mb": per_mb(sys_),
                "client_cpu_ms_per_mb": per_mb(client)}


class RawConnection:
    """One blocking connection to a listener for Kafka requests from Python, as
    `_common.raw_fetch_run`'s, but through TLS and with the SASL login where the listener
    asks for them (strom's own SASL client tokens, `clients.aio.sasl_client`)."""

    def __init__(self, broker: SecureBroker, listener: str):
        raw = socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=60)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if listener in ("SSL", "SASL_SSL"):
            ctx = ssl.create_default_context(cafile=str(broker.kit.ca_pem))
            ctx.load_cert_chain(str(broker.kit.cert_pem(USER)), str(broker.kit.key_pem(USER)))
            self.sock: socket.socket = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        else:
            self.sock = raw
        self.buf = bytearray(64 << 20)
        self.view = memoryview(self.buf)
        self.cid = 0
        if listener == "SASL_SSL":
            self._login(broker.mechanism)

    def call(self, name: str, version: int, body: dict[str, Any]) -> Any:
        from clients.protocol.headers import (RequestHeader, decode_response_header,
                                              encode_request_header)
        from clients.protocol.messages import api
        from clients.protocol.types import Reader, Writer
        spec = api(name)
        self.cid += 1
        w = Writer()
        encode_request_header(w, RequestHeader(spec.key, version, self.cid, "bench"),
                              spec.request_header_version(version))
        spec.encode_request(body, version, w)
        payload = w.getvalue()
        self.sock.sendall(len(payload).to_bytes(4, "big") + payload)
        n = int.from_bytes(self._read(4), "big")
        r = Reader(self._read(n))
        decode_response_header(r, spec.response_header_version(version))
        return spec.decode_response(r, version)

    def _read(self, n: int) -> memoryview:
        if n > len(self.buf):
            self.buf = bytearray(n)
            self.view = memoryview(self.buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(self.view[got:n])
            if not k:
                raise ConnectionError("broker closed the connection")
            got += k
        return self.view[:n]

    def _login(self, mechanism: str) -> None:
        from clients.aio.sasl_client import mechanism_client
        hs = self.call("SaslHandshake", 1, {"mechanism": mechanism})
        if hs.error_code:
            raise BenchFailure(f"SaslHandshake {mechanism}: error {hs.error_code} "
                               f"(enabled: {hs.mechanisms})")
        client = mechanism_client(mechanism, USER, USERS[USER])
        token: bytes | None = client.first_token()
        while token is not None:
            resp = self.call("SaslAuthenticate", 2, {"auth_bytes": token})
            if resp.error_code:
                raise BenchFailure(f"SaslAuthenticate {mechanism}: {resp.error_message}")
            token = client.respond(bytes(resp.auth_bytes))

    def close(self) -> None:
        self.sock.close()


def raw_fetch(broker: SecureBroker, listener: str, topic: str, partitions: int, expected: int,
              record_size: int, timeout: float = 120.0,
              partition_max_bytes: int = 8 << 20) -> dict[str, Any]:
    """`_common.raw_fetch_run` through the listener: Fetch v5 requests for every partition
    on one connection, records counted from the batch headers (recordsCount) without
    decoding them, per-batch work only (like a replica fetcher). confluent-kafka's consumer
    makes a Python object per record and tops out near 200k records/s here whatever the
    broker; this is what shows how fast the broker serves reads through each listener."""
    conn = RawConnection(broker, listener)      # connect, TLS and login before the clock
    offsets = {p: 0 for p in range(partitions)}
    got = 0
    meter = CpuMeter(broker.pids())
    meter.start()
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    while got < expected and time.monotonic() < deadline:
        resp = conn.call("Fetch", 5, {
            "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 60 << 20,
            "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": o, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes} for p, o in offsets.items()]}]})
        for t in resp.responses:
            for pr in t.partitions:
                if pr.error_code:
                    raise BenchFailure(f"raw fetch of {topic}-{pr.partition_index}: error "
                                       f"{pr.error_code}")
                count, next_offset = count_batch_records(pr.records)
                got += count
                if next_offset >= 0:
                    offsets[pr.partition_index] = next_offset
    elapsed = time.perf_counter() - t0
    cpu = meter.read(got * record_size / MB)
    conn.close()
    if got < expected:
        raise BenchFailure(f"raw fetch of {topic} over {listener}: {got:,} of {expected:,} "
                           f"records in {timeout:.0f} s")
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed,
            "mb_per_s": got * record_size / elapsed / MB, **cpu}


def produce(broker: SecureBroker, listener: str, topic: str, a: argparse.Namespace) -> dict[str, Any]:
    """`_common.produce_run` through the listener, with the broker's user and system CPU and
    this process's counted too (from before its warm-up: connections, the TLS handshake, the
    login and one record per partition, next to nothing beside the run's MBs)."""
    records = int(a.megabytes * MB // a.record_size)
    meter = CpuMeter(broker.pids())
    meter.start()
    extra = {k: v for k, v in broker.client(listener).items() if k != "bootstrap.servers"}
    res = produce_run(broker.bootstrap(listener), topic, a.partitions, a.record_size, "none",
                      a.acks, a.max_seconds, records, broker.pids(), spread="chunk",
                      producer_extra=extra)
    run_cpu_s = res.pop("server_cpu_s")     # produce_run's own count, after its warm-up
    res.update(meter.read(res["records"] * a.record_size / MB), target_records=records,
               server_cpu_s_after_warmup=run_cpu_s)
    if res["records"] < records:
        log(f"{listener}: {res['records']:,} of {records:,} records in --max-seconds "
            f"{a.max_seconds:.0f}")
    return res


def ratio(x: float | None, base: float | None) -> float | None:
    return x / base if x is not None and base else None


def cpu_text(phase: dict[str, Any]) -> str:
    user, sys_ = phase.get("server_user_ms_per_mb"), phase.get("server_sys_ms_per_mb")
    return f"{user:.2f}+{sys_:.2f} ms/MB" if user is not None and sys_ is not None else "- ms/MB"


def fmt_ratio(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


def round_order(listeners: list[str], r: int, order: str) -> list[str]:
    """The listeners of round r: the same order every round ("fixed"), or rotated by one
    each round ("rotate", the default), so that over len(listeners) rounds each listener
    runs once in every place of a round and a drift within rounds hits them all alike."""
    if order == "fixed" or not listeners:
        return list(listeners)
    k = r % len(listeners)
    return listeners[k:] + listeners[:k]


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    info = machine()
    info["cpu_flags_crypto"] = sorted(_cpu_crypto_flags())
    info["python_openssl"] = ssl.OPENSSL_VERSION
    log(f"machine: {info}")
    use_broker_repo(a.broker_repo, info)
    out = Results("security", a, info)
    runs: dict[str, list[dict[str, Any]]] = {x: [] for x in a.listener_list}
    with workdir() as wd:
        log("starting strom-1 with listeners " + ", ".join(LISTENERS))
        broker = SecureBroker(wd, a.sasl_mechanism)
        try:
            broker.add_scram_user()
            for listener in a.listener_list:
                broker.check_login(listener)
            info["tls"] = {x: tls_probe(broker, x) for x in ("SSL", "SASL_SSL")}
            log(f"TLS (a Python client's handshake): {info['tls']}")
            for r in range(a.repeats):
                round_runs: dict[str, dict[str, Any]] = {}
                for listener in round_order(a.listener_list, r, a.order):
                    topic = f"bench-{listener.lower()}-{r}"
                    broker.create_topic(topic, a.partitions)
                    load = loadavg()
                    pr = produce(broker, listener, topic, a)
                    # The topic holds the warm-up's record per partition too.
                    cr = consume_all(broker.client(listener), topic, a.partitions,
                                     pr["records"] + a.partitions, a.record_size, broker.pids())
                    fr = raw_fetch(broker, listener, topic, a.partitions,
                                   pr["records"] + a.partitions, a.record_size)
                    run = {"listener": listener, "repeat": r,
                           "position_in_round": len(round_runs), "record_size": a.record_size,
                           "partitions": a.partitions, "acks": a.acks,
                           "sasl_mechanism": a.sasl_mechanism if listener == "SASL_SSL" else None,
                           "loadavg": load, "loadavg_after": loadavg(),
                           "produce": pr, "consume": cr, "fetch": fr}
                    out.run(f"{listener}-run{r}", run)
                    round_runs[listener] = run
                    log(f"{listener} run {r}: produce {pr['mb_per_s']:.1f} MB/s ({pr['records']:,} "
                        f"acknowledged, broker {cpu_text(pr)}); consume "
                        f"{cr['mb_per_s'] or 0:.1f} MB/s ({cr['records']:,} received, broker "
                        f"{cpu_text(cr)}); raw fetch {fr['mb_per_s']:.0f} MB/s (broker "
                        f"{cpu_text(fr)}) (load {load:.2f})")
                # Ratios to the PLAINTEXT run of this round, whatever its place in the round.
                base = round_runs.get("PLAINTEXT")
                for listener, run in round_runs.items():
                    for what in PHASES:
                        run[f"{what}_ratio_to_plaintext"] = (
                            ratio(run[what]["mb_per_s"], base[what]["mb_per_s"])
                            if base is not None and listener != "PLAINTEXT" else None)
                    runs[listener].append(run)
                if base is not None:
                    log(f"round {r} ratios to PLAINTEXT (produce/consume/fetch): " + "; ".join(
                        f"{x} {fmt_ratio(run['produce_ratio_to_plaintext'])}/"
                        f"{fmt_ratio(run['consume_ratio_to_plaintext'])}/"
                        f"{fmt_ratio(run['fetch_ratio_to_plaintext'])}"
                        for x, run in round_runs.items() if x != "PLAINTEXT"))
        finally:
            broker.close()

    results = []
    for listener in a.listener_list:
        rs = runs[listener]
        x: dict[str, Any] = {
            "listener": listener, "record_size": a.record_size, "partitions": a.partitions,
            "acks": a.acks, "sasl_mechanism": a.sasl_mechanism if listener == "SASL_SSL" else None,
            "loadavg": [v for r in rs for v in (r["loadavg"], r["loadavg_after"])]}
        for what in PHASES:
            x[what] = {key: median_of_runs([r[what][key] for r in rs])
                       for key in ("mb_per_s", "server_user_ms_per_mb", "server_sys_ms_per_mb",
                                   "server_cpu_ms_per_mb", "client_cpu_ms_per_mb")}
            x[what]["ratio_to_plaintext"] = median_of_runs(
                [r[f"{what}_ratio_to_plaintext"] for r in rs])
        x["runs"] = rs
        results.append(x)

    rows = []
    for x in results:
        row: list[Any] = [x["listener"] + (f" ({x['sasl_mechanism']})" if x["sasl_mechanism"] else "")]
        for what in PHASES:
            m = x[what]
            spread = m["mb_per_s"]["spread"]
            user, sys_ = m["server_user_ms_per_mb"]["median"], m["server_sys_ms_per_mb"]["median"]
            row += [m["mb_per_s"]["median"], f"{spread:.0%}" if spread is not None else None,
                    m["ratio_to_plaintext"]["median"],
                    f"{user:.2f}+{sys_:.2f}" if user is not None and sys_ is not None else None]
            if what != "fetch":
                row.append(m["client_cpu_ms_per_mb"]["median"])
        rows.append(row)
    loads = [v for x in results for v in x["loadavg"]]
    tls = info.get("tls", {}).get("SSL", {})
    print()
    print(f"strom-1, {a.record_size} B records, {a.partitions} partitions, acks={a.acks}, "
          f"{a.megabytes:g} MB per run; {runs_note(a.repeats)}, the listeners one after the "
          f"other in each round ({'rotated by one each round' if a.order == 'rotate' else 'same order'}: "
          + "; ".join(", ".join(round_order(a.listener_list, r, a.order))
                      for r in range(min(a.repeats, len(a.listener_list))))
          + f"); cpus={info['cpus']} ({info['cpu']}), librdkafka {info['librdkafka']}; TLS "
          f"{tls.get('version')} {tls.get('cipher')} (a Python client's handshake); load average "
          f"{min(loads):.2f}-{max(loads):.2f}; produce: acknowledged records, clock stops at "
          f"flush(); consume: confluent-kafka, timed from its first batch; fetch: Fetch v5 from "
          f"Python counting batch headers (the broker's read path); ratio: median of the "
          f"per-round ratios to that round's PLAINTEXT run; broker u+s: the broker's user + "
          f"system CPU ms per MB; client: this process's CPU ms per MB; spread=(max-min)/median")
    print_table(["listener", "prod MB/s", "spr", "ratio", "broker u+s", "client",
                 "cons MB/s", "spr", "ratio", "broker u+s", "client",
                 "fetch MB/s", "spr", "ratio", "broker u+s"], rows)
    props = {k: ("(the test JAAS)" if k.endswith("jaas.config") else v)
             for k, v in broker.properties.items()}
    summary = {"results": results, "broker_properties": props}
    out.summary(summary)
    write_json(a.json, {"benchmark": "security", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir),
                        **summary})
    return 0


def _cpu_crypto_flags() -> set[str]:
    """The CPU's AES and carry-less multiply flags (what AES-GCM runs on)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return flags & {"aes", "vaes", "pclmulqdq", "vpclmulqdq", "avx2", "avx512f", "sha_ni"}
    except OSError:
        pass
    return set()


if __name__ == "__main__":
    run_main(main)
