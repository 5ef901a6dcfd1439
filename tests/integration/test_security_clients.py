"""Real Kafka clients against strom's secured listeners (issue 20).

One broker process with three listeners: SASL_PLAINTEXT (PLAIN users from the JAAS, SCRAM
users created through AlterUserScramCredentials), SASL_SSL and SSL (client certificates
required, the certificate's CN is the principal); no authorizer. Each of confluent-kafka,
kafka-python, aiokafka, kcat and kafkajs, as alice, in each of five modes (SASL_PLAINTEXT
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, SASL_SSL with SCRAM-SHA-512, SSL with a client
certificate) writes 20 keyed records to a fresh topic and reads exactly those back.

With a wrong password each client learns it is not authenticated within a second and moves
no data: what a good client wrote stays unread by it, and the topic's end offset does not
move. How each client tells it:
- confluent-kafka: error_cb with _AUTHENTICATION; kcat: its "Authentication failure" line;
- kafkajs: connect() rejects with KafkaJSSASLAuthenticationError;
- aiokafka: start() raises KafkaConnectionError("Unable to bootstrap") and the cause
  ("[Error 58] SaslAuthenticationFailed") is only in its log;
- kafka-python 3.0.12 reads the SASL_AUTHENTICATION_FAILED answer (it logs
  SaslAuthenticationFailedError), but its constructor retries the bootstrap until
  bootstrap_timeout_ms and then raises KafkaTimeoutError. It reads the answer only because
  the broker keeps a refused connection open for connection.failed.authentication.delay.ms
  (100 ms) after answering, as Kafka does: its transport drops bytes that arrive in the same
  read as the close (kafka/net/transport.py `_sock_recv`).

kcat is Debian's 1.7.1 with librdkafka 2.0.2, whose SCRAM client-final-message repeats the
client nonce in front of the server's (fixed in librdkafka 2.6.1, confluentinc/librdkafka
#4895). Kafka 3.8.1 to 3.9 accepts a final nonce that ends with the server's nonce; a broker
that wants the exact nonce (as RFC 5802 and Kafka 4 do) refuses kcat's SCRAM logins.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from clients.admin import (AdminClient, NewTopic, ScramMechanism,
                           UserScramCredentialUpsertion)
from clients.producer import Producer as StromProducer
from clients.types import TopicPartition
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.client_matrix import (MODES, MODES_BY_ID, Login, Mode, aiokafka_config,
                                         kafka_python_config, kafkajs_config,
                                         librdkafka_config)
from tests.support.security import USERS, SecurityKit, client_config, secure_overrides

pytestmark = pytest.mark.integration

N = 20
JS_DIR = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
KCAT = shutil.which("kcat")
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kcat", "kafkajs")
WRONG = "not-" + USERS["alice"]
AUTH_DEADLINE_S = 1.0       # the issue: a wrong password is an authentication error within 1 s


@dataclass
class SecuredBroker:
    broker: BrokerProcess
    kit: SecurityKit
    ports: dict[str, int]
    admin: AdminClient          # strom's own, as the super user "admin" over SASL_PLAINTEXT

    def login(self, mode: Mode, password: str | None = None) -> Login:
        return Login(self.kit, f"127.0.0.1:{self.ports[mode.protocol]}", mode,
                     password=password)

    def new_topic(self, prefix: str) -> str:
        topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.admin.create_topics([NewTopic(topic, 1, 1)])
        return topic

    def end_offset(self, topic: str) -> int:
        tp = TopicPartition(topic, 0)
        return self.admin.list_offsets({tp: "latest"})[tp].offset


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    work = tmp_path_factory.mktemp("security-clients")
    kit = SecurityKit(work / "pki")
    ssl_ports = {"SASL_SSL": free_port(), "SSL": free_port()}
    broker = BrokerProcess(work / "broker", overrides=secure_overrides(
        kit, {"SASL_PLAINTEXT": "{port}", **ssl_ports}))   # type: ignore[dict-item]
    broker.start()
    ports = {"SASL_PLAINTEXT": broker.port, **ssl_ports}
    admin = AdminClient(client_config(kit, "SASL_PLAINTEXT", broker.bootstrap, user="admin"))
    try:
        admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", mechanism, iterations=4096,
                                         password=USERS["alice"])
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)])
        yield SecuredBroker(broker, kit, ports, admin)
    finally:
        admin.close()
        broker.stop()


def require(client: str) -> None:
    why = None
    if client == "kcat" and KCAT is None:
        why = "kcat not installed"
    if client == "kafkajs" and (NODE is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir()):
        why = "node or kafkajs not installed (bin/run-tests.sh runs `npm ci` in tests/js)"
    if why is None:
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(why)        # in CI a missing client is a broken set-up, not a skip
    pytest.skip(why)


def records() -> list[tuple[str, str]]:
    return [(f"key-{i}", f"value-{i}") for i in range(N)]


# ---------------------------------------------------------------- produce and consume, per client

Records = list[tuple[str, str]]


def confluent_roundtrip(login: Login, topic: str, sent: Records) -> Records:
    conf = {**librdkafka_config(login), "log_level": 0}
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)
    p = Producer({**conf, "linger.ms": 5})
    for key, value in sent:
        p.produce(topic, key=key, value=value, on_delivery=on_delivery)
    assert p.flush(15) == 0 and failures == [], failures

    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([CkTopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: Records = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(error)
            got.append((bytes(m.key() or b"").decode(), bytes(m.value() or b"").decode()))
    finally:
        c.close()
    return got


def kafka_python_roundtrip(login: Login, topic: str, sent: Records) -> Records:
    conf = kafka_python_config(login)
    p = KafkaProducer(**conf, linger_ms=5)
    try:
        futures = [p.send(topic, key=k.encode(), value=v.encode()) for k, v in sent]
        p.flush(timeout=15)
        for f in futures:
            f.get(timeout=0)        # raises the delivery error, if any
    finally:
        p.close(timeout=5)

    c = KafkaConsumer(**conf, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    tp = KpTopicPartition(topic, 0)
    got: Records = []
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        deadline = time.monotonic() + 15
        while len(got) < len(sent) and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                got.extend((m.key.decode(), m.value.decode()) for m in batch)
    finally:
        c.close(autocommit=False)
    return got


async def _aiokafka_roundtrip(login: Login, topic: str, sent: Records) -> Records:
    p = AIOKafkaProducer(**aiokafka_config(login), linger_ms=5)
    await p.start()
    try:
        await asyncio.gather(*[await p.send(topic, key=k.encode(), value=v.encode())
                               for k, v in sent])
    finally:
        await p.stop()

    c = AIOKafkaConsumer(**aiokafka_config(login), group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    tp = AioTopicPartition(topic, 0)
    got: Records = []
    try:
        c.assign([tp])
        await c.seek_to_beginning(tp)
        deadline = time.monotonic() + 15
        while len(got) < len(sent) and time.monotonic() < deadline:
            for batch in (await c.getmany(tp, timeout_ms=500)).values():
                got.extend((m.key.decode(), m.value.decode()) for m in batch)
    finally:
        await c.stop()
    return got


def aiokafka_roundtrip(login: Login, topic: str, sent: Records) -> Records:
    return asyncio.run(_aiokafka_roundtrip(login, topic, sent))


def kcat_args(login: Login) -> list[str]:
    conf = librdkafka_config(login)
    bootstrap = conf.pop("bootstrap.servers")
    return ["-b", bootstrap, *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")]]


def kcat_roundtrip(login: Login, topic: str, sent: Records) -> Records:
    assert KCAT is not None
    lines = b"".join(f"{k}\t{v}\n".encode() for k, v in sent)
    # kcat prints "% Delivery failed" (and may still exit 0) when a record is not acknowledged.
    p = subprocess.run([KCAT, *kcat_args(login), "-P", "-t", topic, "-K", "\t"], input=lines,
                       capture_output=True, timeout=20)
    assert p.returncode == 0 and b"failed" not in p.stderr.lower(), p.stderr.decode()
    c = subprocess.run([KCAT, *kcat_args(login), "-C", "-t", topic, "-o", "beginning", "-e",
                        "-f", r"%k\t%s\n"], capture_output=True, timeout=20)
    assert c.returncode == 0, c.stderr.decode()
    return [tuple(line.split("\t", 1)) for line in c.stdout.decode().splitlines()]  # type: ignore[misc]


def kafkajs(command: str, login: Login, timeout: float = 40, **args: Any) -> dict:
    assert NODE is not None
    payload = json.dumps({**kafkajs_config(login), **args})
    p = subprocess.run([NODE, str(JS_DIR / "security.js"), command, payload],
                       capture_output=True, text=True, timeout=timeout, cwd=JS_DIR)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else {}
    assert p.returncode == 0 and "result" in last, \
        f"kafkajs {command} failed: {last.get('error')}\n{p.stderr[-3000:]}"
    return last["result"]


def kafkajs_roundtrip(login: Login, topic: str, sent: Records) -> Records:
    result = kafkajs("roundtrip", login, topic=topic, n=len(sent), groupId=f"g-{topic}")
    return [(k, v) for k, v in result["records"]]


ROUNDTRIPS: dict[str, Callable[[Login, str, Records], Records]] = {
    "confluent-kafka": confluent_roundtrip, "kafka-python": kafka_python_roundtrip,
    "aiokafka": aiokafka_roundtrip, "kcat": kcat_roundtrip, "kafkajs": kafkajs_roundtrip}


@pytest.mark.parametrize("mode", MODES, ids=[m.id for m in MODES])
@pytest.mark.parametrize("client", CLIENTS)
def test_client_produces_and_consumes(secured: SecuredBroker, client: str, mode: Mode) -> None:
    require(client)
    topic = secured.new_topic(f"{client}-{mode.id}")
    sent = records()
    got = ROUNDTRIPS[client](secured.login(mode), topic, sent)
    assert got == sent
    assert secured.end_offset(topic) == N


# ---------------------------------------------------------------- a wrong password, per client

@dataclass
class Refusal:
    """What a client with a wrong password saw: for each attempt (producer, consumer) the
    seconds from its start to its first authentication error, and that error's text."""

    seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    consumed: int = 0           # records the client read
    delivered: int = 0          # records the client was told were written

    def saw(self, attempt: str, t0: float, error: str) -> None:
        if attempt not in self.seconds:
            self.seconds[attempt] = time.monotonic() - t0
            self.errors[attempt] = error


def confluent_refused(login: Login, topic: str) -> Refusal:
    refusal = Refusal()

    def run(attempt: str, make: Callable[[dict], Any], use: Callable[[Any], None]) -> None:
        t0 = time.monotonic()

        def on_error(err: KafkaError) -> None:
            if err.code() == KafkaError._AUTHENTICATION:
                refusal.saw(attempt, t0, err.str())
        client = make({**librdkafka_config(login), "log_level": 0, "error_cb": on_error})
        use(client)
        deadline = t0 + 3
        while attempt not in refusal.seconds and time.monotonic() < deadline:
            client.poll(0.02)
        settle = time.monotonic() + 0.3     # anything that still arrives after the error
        while time.monotonic() < settle:
            m = client.poll(0.05)
            if attempt == "consumer" and m is not None and m.error() is None:
                refusal.consumed += 1
        if attempt == "producer":
            client.purge()
            client.flush(1)
        else:
            client.close()

    def produce(p: Producer) -> None:
        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                refusal.delivered += 1
        p.produce(topic, key="intruder", value="intruder", on_delivery=on_delivery)

    run("producer", Producer, produce)
    run("consumer", lambda conf: Consumer({**conf, "group.id": f"g-{topic}"}),
        lambda c: c.assign([CkTopicPartition(topic, 0, OFFSET_BEGINNING)]))
    return refusal


class _Records(logging.Handler):
    """A client library's log records, with the time each was emitted."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((time.monotonic(), record.getMessage()))

    def matching(self, text: str, after: float = 0.0) -> list[tuple[float, str]]:
        return [(t, m) for t, m in self.seen if text in m and t >= after]


@contextlib.contextmanager
def captured_log(logger_name: str) -> Iterator[_Records]:
    """`logger_name`'s records at DEBUG while the block runs (kept out of pytest's report)."""
    logger = logging.getLogger(logger_name)
    handler, level, propagate = _Records(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def kafka_python_refused(login: Login, topic: str) -> Refusal:
    """kafka-python 3.0 raises no authentication error of its own (module docstring): the
    evidence is that it sent its credentials, read the broker's refusal within a second,
    was never authenticated, and gave up at its bootstrap timeout."""
    from kafka.errors import KafkaError as KpError
    refusal = Refusal()
    conf = {**kafka_python_config(login), "bootstrap_timeout_ms": 1000}
    for attempt, make in (("producer", lambda: KafkaProducer(**conf)),
                          ("consumer", lambda: KafkaConsumer(topic, **conf, group_id=None,
                                                             auto_offset_reset="earliest"))):
        with captured_log("kafka") as log:
            t0 = time.monotonic()
            with pytest.raises(KpError) as raised:
                make().close()      # not reached unless it authenticated
        sent = [(t, m) for t, m in log.matching("SaslAuthenticateRequest") if "Sending" in m]
        assert sent, f"kafka-python's {attempt} never sent its credentials: {raised.value!r}"
        authenticated = [m for _, m in log.seen if m.endswith(": Connected")]
        assert not authenticated, authenticated
        lost = log.matching("Connection lost", after=sent[0][0])
        assert lost, f"kafka-python's {attempt} kept a connection: {raised.value!r}"
        read = log.matching("SaslAuthenticationFailedError", after=sent[0][0])
        assert read, f"kafka-python's {attempt} never read the refusal: {raised.value!r}"
        refusal.seconds[attempt] = read[0][0] - t0
        refusal.errors[attempt] = (f"{raised.value!r} after {time.monotonic() - t0:.2f} s; "
                                   f"first attempt: {lost[0][1].rsplit(': ', 2)[-2:]}; "
                                   f"SaslAuthenticationFailedError read {len(read)} times")
    return refusal


def aiokafka_refused(login: Login, topic: str) -> Refusal:
    from aiokafka.errors import KafkaConnectionError
    refusal = Refusal()

    async def attempt(name: str, client: Any) -> None:
        with captured_log("aiokafka") as log:
            t0 = time.monotonic()
            try:
                with pytest.raises(KafkaConnectionError) as raised:
                    await client.start()
                    if name == "consumer":
                        refusal.consumed += sum(
                            len(b) for b in (await client.getmany(timeout_ms=500)).values())
            finally:
                await client.stop()
            logged = log.matching("SaslAuthenticationFailed")
        assert logged, f"aiokafka's {name}: no authentication error, {raised.value!r}"
        refusal.seconds[name] = logged[0][0] - t0
        refusal.errors[name] = f"{raised.value!r}; logged: {logged[0][1][-120:]}"

    async def both() -> None:
        await attempt("producer", AIOKafkaProducer(**aiokafka_config(login)))
        await attempt("consumer", AIOKafkaConsumer(
            topic, **aiokafka_config(login), group_id=None, auto_offset_reset="earliest"))
    asyncio.run(both())
    return refusal


def _stderr_lines(proc: subprocess.Popen, into: list[tuple[float, str]]) -> threading.Thread:
    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            into.append((time.monotonic(), line.decode(errors="replace").rstrip()))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def kcat_refused(login: Login, topic: str) -> Refusal:
    assert KCAT is not None
    refusal = Refusal()
    commands = {"producer": ["-P", "-t", topic, "-K", "\t"],
                "consumer": ["-C", "-t", topic, "-o", "beginning", "-e", "-f", r"%k\t%s\n"]}
    for attempt, args in commands.items():
        lines: list[tuple[float, str]] = []
        t0 = time.monotonic()
        proc = subprocess.Popen([KCAT, *kcat_args(login), *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        reader = _stderr_lines(proc, lines)
        assert proc.stdin is not None
        if attempt == "producer":
            proc.stdin.write(b"intruder\tintruder\n")
        proc.stdin.close()
        deadline = t0 + 3
        while time.monotonic() < deadline and not any("Authentication" in m for _, m in lines):
            time.sleep(0.01)
        time.sleep(0.3)             # anything that still arrives after the error
        if proc.poll() is None:
            proc.kill()             # kcat -C keeps retrying until its metadata timeout
        proc.wait(5)
        reader.join(5)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        auth = next(((t, m) for t, m in lines if "Authentication" in m), None)
        assert auth is not None, f"kcat {attempt}: no authentication error:\n" + \
            "\n".join(m for _, m in lines)
        refusal.seconds[attempt] = auth[0] - t0
        refusal.errors[attempt] = auth[1]
        if attempt == "consumer":
            refusal.consumed = len(out.splitlines())
    return refusal


def kafkajs_refused(login: Login, topic: str) -> Refusal:
    result = kafkajs("wrongPassword", login, topic=topic, groupId=f"g-{topic}", retries=0)
    refusal = Refusal()
    for attempt in ("producer", "consumer"):
        error = result[attempt]["error"]
        assert error is not None, f"kafkajs {attempt} connected with a wrong password: {result}"
        assert error["name"] == "KafkaJSSASLAuthenticationError", result
        refusal.seconds[attempt] = result[attempt]["ms"] / 1000
        refusal.errors[attempt] = f"{error['name']}: {error['message']}"
    refusal.consumed = result["consumer"]["consumed"]
    return refusal


# One mode per client; PLAIN and both SCRAM mechanisms, and SASL_SSL, all appear.
REFUSALS: dict[str, tuple[str, Callable[[Login, str], Refusal]]] = {
    "confluent-kafka": ("sasl_plaintext-scram512", confluent_refused),
    "kafka-python": ("sasl_plaintext-plain", kafka_python_refused),
    "aiokafka": ("sasl_plaintext-scram256", aiokafka_refused),
    "kcat": ("sasl_plaintext-plain", kcat_refused),
    "kafkajs": ("sasl_ssl-scram512", kafkajs_refused),
}


@pytest.mark.alone
@pytest.mark.parametrize("client", CLIENTS)
def test_wrong_password_is_refused_at_once_and_moves_no_data(
        secured: SecuredBroker, client: str, record_property: Callable[[str, Any], None]) -> None:
    require(client)
    mode_id, refused = REFUSALS[client]
    mode = MODES_BY_ID[mode_id]
    topic = secured.new_topic(f"wrong-{client}")
    seeder = StromProducer(client_config(secured.kit, "SASL_PLAINTEXT",
                                         secured.broker.bootstrap, user="admin"))
    try:
        for key, value in records():
            seeder.send(topic, key=key.encode(), value=value.encode())
        seeder.flush(15)
    finally:
        seeder.close()
    assert secured.end_offset(topic) == N

    refusal = refused(secured.login(mode, password=WRONG), topic)
    record_property("wrong_password_seconds", refusal.seconds)
    print(f"{client} {mode.id}: {refusal}")

    assert set(refusal.seconds) == {"producer", "consumer"}, refusal
    assert max(refusal.seconds.values()) < AUTH_DEADLINE_S, refusal
    assert refusal.consumed == 0 and refusal.delivered == 0, refusal
    assert secured.end_offset(topic) == N       # nothing the client tried was written
