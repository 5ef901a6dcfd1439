"""Capture golden request frames from real Kafka clients (a script, not a test).

Starts a strom broker process and a recording TCP proxy in front of it; the broker
advertises the proxy's address, so every connection a client opens (bootstrap and after)
goes through the proxy, which records each complete size-prefixed request frame. Each real
client then runs a small representative session through the proxy:

* confluent-kafka: AdminClient create_topics (3 partitions, one config); an idempotent
  Producer with gzip, then another with zstd; a Consumer with assign + consume.
* kafka-python: KafkaAdminClient create_topics; KafkaProducer (idempotent by default) with
  lz4; KafkaConsumer assign / seek_to_beginning / poll; offsets_for_times.
* aiokafka: AIOKafkaProducer with snappy; AIOKafkaConsumer assign + getmany.
* kcat: -L (metadata), -P (produce), -C (consume).

For each client the first frame of each distinct (api_key, api_version, variant) is saved
as tests/unit/golden/<client>/<nn>_<ApiName>_v<version>.bin (frame body, no size prefix),
where the variant separates Produce frames by codec and ListOffsets frames by what they ask
for; tests/unit/golden/manifest.json describes them. tests/unit/test_golden.py decodes them
and checks them against what this script sent (see `sent_records`).

Run from the repository root:  .venv/bin/python tests/tools/capture_golden.py
"""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from clients.protocol.headers import decode_request_header, peek_api  # noqa: E402
from clients.protocol.messages import API_BY_KEY  # noqa: E402
from clients.protocol.records import iter_batch_headers  # noqa: E402
from clients.protocol.types import Reader  # noqa: E402
from tests.support.broker_process import BrokerProcess, free_port  # noqa: E402

GOLDEN = REPO / "tests" / "unit" / "golden"

BASE_TS = 1_700_000_000_000
RECORDS_PER_BATCH = 3
TOPIC_CONFIG = {"retention.ms": "86400000"}

# client directory -> the topic its session uses
TOPICS = {
    "confluent_kafka": "golden-confluent",
    "kafka_python": "golden-kafka-python",
    "aiokafka": "golden-aiokafka",
    "kcat": "golden-kcat",
}
# (client, codec) -> the partition its records are produced to
PRODUCE_PARTITION = {
    ("confluent_kafka", "gzip"): 0,
    ("confluent_kafka", "zstd"): 1,
    ("kafka_python", "lz4"): 2,
    ("aiokafka", "snappy"): 0,
    ("kcat", "none"): 0,
}
CONFLUENT_GROUP = "golden-confluent"  # group.id of the confluent consumer (which only assigns)
OFFSETS_FOR_TIME = BASE_TS + 1  # kafka-python offsets_for_times asks for this timestamp


def sent_records(client: str, codec: str, with_timestamps: bool = True
                 ) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int | None]]:
    """(key, value, headers, timestamp) of each record a client produces with a codec."""
    out = []
    for i in range(RECORDS_PER_BATCH):
        key = f"{client}-{codec}-{i}".encode()
        value = f"value {i} from {client} with {codec}".encode()
        # The same headers on every record: kcat can only set headers per run (-H).
        headers = [("client", client.encode()), ("codec", codec.encode())]
        out.append((key, value, headers, BASE_TS + i if with_timestamps else None))
    return out


# ----------------------------------------------------------------------------- the proxy

@dataclass
class Captured:
    seq: int             # arrival order over all connections
    label: str | None    # the session that opened the connection
    conn: int
    frame: bytes


@dataclass
class RecordingProxy:
    """A loopback TCP proxy to the broker recording every request frame clients send.

    Connections are labelled with `label` as it is when they are accepted; a None label
    records nothing. Threads: one accept loop, two pumps per connection; `frames` is
    appended under `_lock`.
    """

    port: int
    target_port: int
    label: str | None = None
    frames: list[Captured] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _conns: int = 0

    def start(self) -> "RecordingProxy":
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", self.port))
        self._server.listen(64)
        threading.Thread(target=self._accept_loop, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._conns += 1
                conn = self._conns
            label = self.label
            threading.Thread(target=self._pump_requests, args=(client, upstream, label, conn),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump_requests(self, src: socket.socket, dst: socket.socket, label: str | None,
                       conn: int) -> None:
        buf = bytearray()
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                _shut(dst)
                return
            buf += data
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + size:
                    break
                frame = bytes(buf[4:4 + size])
                del buf[:4 + size]
                if label is not None:
                    with self._lock:
                        self.frames.append(Captured(len(self.frames), label, conn, frame))
            try:
                dst.sendall(data)
            except OSError:
                return

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                _shut(dst)
                return
            try:
                dst.sendall(data)
            except OSError:
                return


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass


# ----------------------------------------------------------------------------- sessions

def confluent_session(bootstrap: str, proxy: RecordingProxy) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = TOPICS["confluent_kafka"]
    proxy.label = "confluent_kafka:admin"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                       config=TOPIC_CONFIG)])
    fs[topic].result(30)
    del admin

    proxy.label = "confluent_kafka:producer"
    errors: list = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for codec in ("gzip", "zstd"):
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                      "compression.type": codec, "linger.ms": 200})
        part = PRODUCE_PARTITION[("confluent_kafka", codec)]
        for key, value, headers, ts in sent_records("confluent_kafka", codec):
            assert ts is not None
            p.produce(topic, key=key, value=value, headers=list(headers), timestamp=ts,
                      partition=part, on_delivery=on_delivery)
        assert p.flush(30) == 0 and not errors, errors
        del p

    proxy.label = "confluent_kafka:consumer"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": CONFLUENT_GROUP,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got, eof = 0, set[Any]()
    deadline = time.monotonic() + 30
    while len(eof) < 3 and time.monotonic() < deadline:
        for m in c.consume(100, 1.0):
            if m.error():
                eof.add(m.partition())
            else:
                got += 1
    c.close()
    assert got == 2 * RECORDS_PER_BATCH, got


def kafka_python_session(bootstrap: str, proxy: RecordingProxy) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = TOPICS["kafka_python"]
    proxy.label = "kafka_python:admin"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                  topic_configs=TOPIC_CONFIG)])
    admin.close()

    proxy.label = "kafka_python:producer"
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", linger_ms=200)
    part = PRODUCE_PARTITION[("kafka_python", "lz4")]
    futures = [p.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts,
                      partition=part)
               for key, value, headers, ts in sent_records("kafka_python", "lz4")]
    p.flush(30)
    for f in futures:
        f.get(30)
    p.close()

    tp = TopicPartition(topic, part)
    proxy.label = "kafka_python:consumer"
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = 0
    deadline = time.monotonic() + 30
    while got < RECORDS_PER_BATCH and time.monotonic() < deadline:
        for recs in c.poll(1000).values():
            got += len(recs)
    found = c.offsets_for_times({tp: OFFSETS_FOR_TIME})
    assert found[tp] is not None and found[tp].offset == 1, found
    c.close()
    assert got == RECORDS_PER_BATCH, got


def aiokafka_session(bootstrap: str, proxy: RecordingProxy) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = TOPICS["aiokafka"]
    part = PRODUCE_PARTITION[("aiokafka", "snappy")]

    async def run() -> None:
        proxy.label = "aiokafka:producer"
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="snappy",
                             linger_ms=200)
        await p.start()
        try:
            futures = [await p.send(topic, key=key, value=value, headers=headers,
                                    timestamp_ms=ts, partition=part)
                       for key, value, headers, ts in sent_records("aiokafka", "snappy")]
            await asyncio.gather(*futures)
        finally:
            await p.stop()

        tp = TopicPartition(topic, part)
        proxy.label = "aiokafka:consumer"
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = 0
            deadline = time.monotonic() + 30
            while got < RECORDS_PER_BATCH and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=1000)).values():
                    got += len(recs)
            assert got == RECORDS_PER_BATCH, got
        finally:
            await c.stop()

    asyncio.run(run())


def kcat_session(bootstrap: str, proxy: RecordingProxy) -> None:
    topic = TOPICS["kcat"]
    part = PRODUCE_PARTITION[("kcat", "none")]
    proxy.label = "kcat:metadata"
    subprocess.run(["kcat", "-L", "-b", bootstrap, "-t", topic], check=True,
                   capture_output=True, timeout=60)
    # kcat cannot set record timestamps: librdkafka stamps them with its clock.
    records = sent_records("kcat", "none", with_timestamps=False)
    args = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(part), "-K", "\t",
            "-X", "linger.ms=200"]
    for hk, hv in records[0][2]:
        args += ["-H", f"{hk}={hv.decode()}"]
    proxy.label = "kcat:producer"
    subprocess.run(args, input=b"".join(k + b"\t" + v + b"\n" for k, v, _, _ in records),
                   check=True, capture_output=True, timeout=60)
    proxy.label = "kcat:consumer"
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(part),
                          "-o", "beginning", "-c", str(RECORDS_PER_BATCH), "-e"],
                         check=True, capture_output=True, timeout=60)
    assert out.stdout.count(b"\n") == RECORDS_PER_BATCH, out.stdout


def setup_topics(bootstrap: str) -> None:
    """Topics the sessions that do not create their own use (not recorded)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(TOPICS[c], num_partitions=1, replication_factor=1)
                              for c in ("aiokafka", "kcat")])
    for f in fs.values():
        f.result(30)


def topic_ids(bootstrap: str) -> dict[str, str]:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.describe_topics(TopicCollection(list(TOPICS.values())))
    out = {}
    for name, f in fs.items():
        tid = f.result(30).topic_id
        hi = tid.get_most_significant_bits() & (2**64 - 1)
        lo = tid.get_least_significant_bits() & (2**64 - 1)
        out[name] = str(uuid.UUID(int=(hi << 64) | lo))
    return out


# ----------------------------------------------------------------------------- saving

def library_versions() -> dict[str, str]:
    import aiokafka
    import confluent_kafka
    import kafka
    kcat = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
    m = re.search(r"Version ([\d.]+) .*?librdkafka ([\d.]+)", kcat, re.S)
    kcat_version = f"{m.group(1)} (librdkafka {m.group(2)})" if m else kcat.strip()
    return {
        "confluent_kafka": f"{confluent_kafka.__version__} "
                           f"(librdkafka {confluent_kafka.libversion()[0]})",
        "kafka_python": kafka.__version__,
        "aiokafka": aiokafka.__version__,
        "kcat": kcat_version,
    }


def variant(api_key: int, api_version: int, frame: bytes) -> str:
    """What separates two frames of one (api, version) worth keeping both."""
    api = API_BY_KEY[api_key]
    r = Reader(frame)
    decode_request_header(r, api.request_header_version(api_version))
    if api.name == "Produce":
        body = api.decode_request(r, api_version)
        codecs = {h.attributes & 0x07
                  for t in body.topic_data for p in t.partition_data
                  for _, h in iter_batch_headers(p.records or b"")}
        return "codec=" + ",".join(str(c) for c in sorted(codecs))
    if api.name == "Metadata":
        body = api.decode_request(r, api_version)
        if body.topics is None or (api_version == 0 and not body.topics):
            return "topics=all"
        return "topics=named" if body.topics else "topics=none"
    if api.name == "ListOffsets":
        body = api.decode_request(r, api_version)
        ts = {p.timestamp for t in body.topics for p in t.partitions}
        return "timestamp=" + ("earliest" if ts == {-2} else "latest" if ts == {-1} else "time")
    return ""


CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


def describe(api_name: str, client: str, var: str) -> str:
    if var.startswith("codec="):
        codec = CODEC_NAMES[int(var[6:])]
        return f"{api_name}: {RECORDS_PER_BATCH} keyed records with headers, {codec}"
    if var.startswith("timestamp="):
        return f"{api_name}: offsets by {var[10:]}"
    if var.startswith("topics="):
        return {"all": "Metadata for all topics", "none": "Metadata for brokers only",
                "named": "Metadata for the session's topic"}[var[7:]]
    return {
        "ApiVersions": "ApiVersions: the first request on a connection",
        "CreateTopics": "CreateTopics: 3 partitions with retention.ms",
        "InitProducerId": "InitProducerId for an idempotent producer",
        "Fetch": "Fetch from the topic's partitions",
        "FindCoordinator": "FindCoordinator for the consumer group",
    }.get(api_name, api_name)


def save(proxy: RecordingProxy, versions: dict[str, str], ids: dict[str, str]) -> None:
    if GOLDEN.exists():
        shutil.rmtree(GOLDEN)
    GOLDEN.mkdir(parents=True)
    entries = []
    for client in TOPICS:
        seen: set[tuple[int, int, str]] = set()
        n = 0
        mine = [c for c in proxy.frames if (c.label or "").split(":")[0] == client]
        for cap in sorted(mine, key=lambda c: c.seq):
            key, version, _ = peek_api(cap.frame)
            api = API_BY_KEY.get(key)
            name = api.name if api else f"Api{key}"
            supported = api is not None and api.supports(version)
            var = variant(key, version, cap.frame) if supported else ""
            if (key, version, var) in seen:
                continue
            seen.add((key, version, var))
            n += 1
            rel = f"{client}/{n:02d}_{name}_v{version}.bin"
            (GOLDEN / client).mkdir(exist_ok=True)
            (GOLDEN / rel).write_bytes(cap.frame)
            entry = {"file": rel, "client": client, "library_version": versions[client],
                     "component": (cap.label or ":").split(":")[1], "api": name, "api_key": key,
                     "version": version,
                     "description": describe(name, client, var) if supported else
                     f"{name} v{version}: above strom's highest version (the client retries "
                     f"with a lower one)"}
            if var:
                entry["variant"] = var
            entries.append(entry)
    manifest = {
        "about": "Request frames (without the 4-byte size) captured from real clients by "
                 "tests/tools/capture_golden.py; checked by tests/unit/test_golden.py.",
        "topics": {name: {"topic_id": ids[name]} for name in TOPICS.values()},
        "fixtures": entries,
    }
    (GOLDEN / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    total = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    print(f"saved {len(entries)} fixtures, {total} bytes, in {GOLDEN}")
    for e in entries:
        print(f"  {e['file']:45} {e['description']}")


def main() -> None:
    sessions = [("confluent_kafka", confluent_session), ("kafka_python", kafka_python_session),
                ("aiokafka", aiokafka_session), ("kcat", kcat_session)]
    proxy_port = free_port()
    with tempfile.TemporaryDirectory(prefix="strom-golden-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
            "auto.create.topics.enable": "false",
        }).start()
        proxy = RecordingProxy(proxy_port, broker.port).start()
        bootstrap = f"127.0.0.1:{proxy_port}"
        try:
            setup_topics(bootstrap)
            for client, session in sessions:
                print(f"session {client} ...", flush=True)
                session(bootstrap, proxy)
                proxy.label = None
                time.sleep(0.5)  # let the session's last requests and closes drain
            ids = topic_ids(bootstrap)
        finally:
            proxy.stop()
            broker.stop()
    save(proxy, library_versions(), ids)


if __name__ == "__main__":
    main()
