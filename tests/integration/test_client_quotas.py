"""Client quotas against real broker processes and real clients (confluent-kafka's producer
and consumer report the broker's throttle_time_ms through throttle_cb):

- a producer limited to 1 MB/s producing flat out writes quota x duration (+/- 2 MB), is told
  throttle_time_ms, and an unlimited producer beside it is not slowed (its rate is printed
  against a solo run of the same length);
- a consumer limited by consumer_byte_rate is throttled;
- kafka-configs.sh --entity-type users|clients describes and alters quotas (Kafka's output);
- strom's AdminClient alters and describes them (AlterClientQuotas/DescribeClientQuotas);
- in a 3-broker cluster a change made through one broker is kept in ZooKeeper as Kafka keeps
  it, beside the user's SCRAM credentials, and every broker enforces it.

The brokers run with quota.window.num=2 (samples of 1 s): with Kafka's default of 11 a
fresh client is measured as if the 10 windows before it had been empty, so it may write up
to 10 s of its quota at once before being throttled (Kafka does the same; the unit tests
model it), which would hide the rate in a test of seconds.

The produce test runs 6 s by default and the issue's 20 s with --long.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from clients.admin import AdminClient
from clients.protocol.errors import InvalidRequestError
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MB = 1_000_000
QUOTA = 1_048_576                       # 1 MB/s (MiB, as operators write it)
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RECORD = b"x" * 10_000


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=60)


class FlatOut:
    """A confluent-kafka producer sending 10 kB records as fast as it can for `seconds`:
    the bytes acknowledged in that time, and the largest throttle_time_ms it was told."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, seconds: float):
        self.acked = 0
        self.max_throttle_ms = 0
        self.throttles = 0
        self.throttled_by: set[int] = set()
        self.seconds = seconds
        self.topic = topic
        # Requests of at most 128 kB: a rate of 1 MB/s is then measured in steps finer than
        # a whole second's worth. A 16 MB local queue: a throttled client waits for room
        # instead of spinning (both clients share this process and its GIL).
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                                  "acks": 1, "linger.ms": 5, "batch.size": 131072,
                                  "queue.buffering.max.kbytes": 16384, "log_level": 0,
                                  "throttle_cb": self._throttled})

    def _throttled(self, event) -> None:
        if event.throttle_time > 0:
            self.throttles += 1
            self.throttled_by.add(event.broker_id)
            self.max_throttle_ms = max(self.max_throttle_ms, int(event.throttle_time * 1000))

    def _delivered(self, err, msg) -> None:
        if err is None and time.monotonic() <= self.until:
            self.acked += len(msg.value())

    def run(self) -> "FlatOut":
        self.until = time.monotonic() + self.seconds
        p = self.producer
        while time.monotonic() < self.until:
            try:
                p.produce(self.topic, RECORD, on_delivery=self._delivered)
            except BufferError:
                p.poll(0.01)
                continue
            p.poll(0)
        while time.monotonic() < self.until + 0.2:
            p.poll(0.05)
        p.purge()
        p.flush(10)
        return self


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 1) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        from clients.types import NewTopic
        admin.create_topics([NewTopic(name, partitions, rf)])


@pytest.mark.alone
def test_a_producer_limited_to_1_mb_per_second_beside_an_unlimited_one(broker_factory, long_run):
    seconds = 20.0 if long_run else 6.0
    b = broker_factory(WINDOWS)
    create_topic(b.bootstrap, "quota-slow")
    create_topic(b.bootstrap, "quota-fast")
    solo = FlatOut(b.bootstrap, "fast-app", "quota-fast", seconds).run()

    r = kafka_configs(b.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "slow-app",
                      "--add-config", f"producer_byte_rate={QUOTA}")
    assert r.returncode == 0, r.stderr
    slow = FlatOut(b.bootstrap, "slow-app", "quota-slow", seconds)
    fast = FlatOut(b.bootstrap, "fast-app", "quota-fast", seconds)
    t = threading.Thread(target=slow.run)
    t.start()
    fast.run()
    t.join()
    print(f"\nquota 1 MiB/s for {seconds:.0f} s: limited client wrote {slow.acked / MB:.2f} MB "
          f"(expected {QUOTA * seconds / MB:.2f}), max throttle_time_ms {slow.max_throttle_ms} "
          f"in {slow.throttles} throttled answers; unlimited client {fast.acked / MB / seconds:.1f} "
          f"MB/s beside it vs {solo.acked / MB / seconds:.1f} MB/s solo")
    # The 20 +/- 2 MB (--long: 21.19, 22.88 and 21.60 MB seen). Kafka's sampled rate
    # lets a client run ahead by what the samples forget as they expire (up to quota x
    # samples x window, 2 MB here), and requests already on the wire when a mute begins are
    # read after it (librdkafka keeps up to 5 in flight): the short form allows 3 MB over its
    # 6 s (a CI run wrote 8.71 MB against 6.29; local runs 6.95-7.24).
    expected = QUOTA * seconds
    assert abs(slow.acked - expected) <= (2 if long_run else 3) * MB
    assert slow.max_throttle_ms > 0
    assert fast.throttles == 0
    # Not slowed by the quota: never throttled, and far above the limit. Its rate beside the
    # other client is printed against its solo run but only loosely bounded: the two clients
    # and the broker share two cores, and the solo run's rate varies from run to run (76 to
    # 264 MB/s seen; 122 beside the limited client in the run that saw 264 solo).
    assert fast.acked > 10 * slow.acked
    assert fast.acked >= 0.3 * solo.acked


@pytest.mark.alone
def test_a_fetch_quota_throttles_a_consumer(broker_factory):
    b = broker_factory(WINDOWS)
    create_topic(b.bootstrap, "quota-read")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "log_level": 0})
    for _ in range(600):                                     # 6 MB
        p.produce("quota-read", RECORD)
        p.poll(0)
    assert p.flush(30) == 0
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.alter_client_quotas([({"client-id": "slow-reader"}, {"consumer_byte_rate": QUOTA})])

    def read(client_id: str, seconds: float) -> tuple[int, float]:
        throttled: list[float] = []
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": client_id, "client.id": client_id,
                      "auto.offset.reset": "earliest", "log_level": 0,
                      "throttle_cb": lambda e: throttled.append(e.throttle_time)})
        c.subscribe(["quota-read"])
        got = 0
        until = time.monotonic() + seconds
        while time.monotonic() < until and got < 600 * len(RECORD):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += len(m.value())
        c.close()
        return got, max(throttled, default=0.0)

    free, free_throttle = read("free-reader", 15)
    slow, slow_throttle = read("slow-reader", 3)
    print(f"\nconsumer limited to 1 MiB/s read {slow / MB:.2f} MB in 3 s (max throttle "
          f"{slow_throttle * 1000:.0f} ms); unlimited consumer read {free / MB:.2f} MB")
    assert free == 600 * len(RECORD) and free_throttle == 0
    assert slow_throttle > 0
    assert slow <= 4.5 * MB            # 3 s at 1 MiB/s, plus a first fetch of at most a window


def test_kafka_configs_describe_and_alter_users_and_clients(broker_factory):
    b = broker_factory()

    def ok(*args: str) -> list[str]:
        r = kafka_configs(b.bootstrap, *args)
        assert r.returncode == 0, f"{args}: {r.stdout} {r.stderr}"
        return r.stdout.splitlines()

    assert ok("--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
              "producer_byte_rate=1048576,consumer_byte_rate=2097152") == [
        "Completed updating config for user alice."]
    assert ok("--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
              "clients", "--entity-default", "--add-config", "request_percentage=50.5") == [
        "Completed updating config for user alice."]
    assert ok("--alter", "--entity-type", "clients", "--entity-default", "--add-config",
              "producer_byte_rate=1024") == ["Completed updating default config for clients in the cluster."]
    no_scram = ("Error retrieving SCRAM credential configs for user-principal 'alice': "
                "ResourceNotFoundException: Attempt to describe a user credential that does not "
                "exist: alice")       # as Kafka: a user's describe covers its credentials too
    assert ok("--describe", "--entity-type", "users", "--entity-name", "alice") == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, "
        "producer_byte_rate=1048576.0", no_scram]
    assert ok("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
              "clients") == []                   # any client id it names: none, only the default
    assert ok("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
              "clients", "--entity-default") == ["Quota configs for user-principal 'alice', the default client-id are "
                             "request_percentage=50.5"]
    assert ok("--describe", "--entity-type", "clients", "--entity-default") == [
        "Quota configs for the default client-id are producer_byte_rate=1024.0"]
    assert ok("--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config",
              "consumer_byte_rate") == ["Completed updating config for user alice."]
    assert ok("--describe", "--entity-type", "users", "--entity-name", "alice") == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0", no_scram]
    bad = kafka_configs(b.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "x",
                        "--add-config", "producer_byte_rate=1.5")
    assert bad.returncode == 1
    assert bad.stderr.strip().startswith("Error while executing config command : ")
    assert "must be a Long value" in bad.stderr


def test_strom_admin_client_alters_and_describes_quotas(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.alter_client_quotas([
            ({"user": "bob"}, {"producer_byte_rate": 4096}),
            ({"user": None, "client-id": "app"}, {"request_percentage": 25}),
        ])
        got = admin.describe_client_quotas()
        assert got == {(("user", "bob"),): {"producer_byte_rate": 4096.0},
                       (("client-id", "app"), ("user", None)): {"request_percentage": 25.0}}
        assert admin.describe_client_quotas([("user", 1, None)], strict=False) == {
            (("client-id", "app"), ("user", None)): {"request_percentage": 25.0}}
        admin.alter_client_quotas([({"user": "bob"}, {"producer_byte_rate": None})])
        assert (("user", "bob"),) not in admin.describe_client_quotas()
        with pytest.raises(InvalidRequestError, match="Invalid configuration key"):
            admin.alter_client_quotas([({"user": "bob"}, {"nonsense_rate": 1})])
        admin.alter_client_quotas([({"user": "bob"}, {"producer_byte_rate": 1})], validate_only=True)
        assert (("user", "bob"),) not in admin.describe_client_quotas()


def test_a_quota_change_reaches_every_broker_of_a_cluster(tmp_path):
    with Cluster(tmp_path, brokers=3, overrides=WINDOWS) as c:
        create_topic(c.bootstrap, "quota-spread", partitions=3, rf=1)
        leaders = {c.wait_for_leader("quota-spread", p) for p in range(3)}
        first = c.broker(0).bootstrap
        with AdminClient({"bootstrap.servers": first}) as admin:
            from clients.aio.scram_types import UserScramCredentialUpsertion, ScramMechanism
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_256, 4096, "pw")])
            admin.alter_client_quotas([({"client-id": "everywhere"}, {"producer_byte_rate": 20_000}),
                                       ({"user": "carol"}, {"consumer_byte_rate": 3000})])
        zk = c.zk
        data, _ = zk.get(c.path("/config/clients/everywhere"))
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "20000"}}
        carol = json.loads(zk.get(c.path("/config/users/carol"))[0])["config"]
        assert carol["consumer_byte_rate"] == "3000" and "SCRAM-SHA-256" in carol
        notes = [json.loads(zk.get(c.path(f"/config/changes/{n}"))[0])
                 for n in zk.get_children(c.path("/config/changes"))]
        assert {"version": 2, "entity_path": "clients/everywhere"} in notes
        # Every broker has it: each answers DescribeClientQuotas with it...
        for i in range(3):
            def seen() -> bool | None:
                resp = c.request(c.broker(i).port, "DescribeClientQuotas", 1,
                                 {"components": [{"entity_type": "client-id", "match_type": 0,
                                                  "match": "everywhere"}], "strict": True})
                return bool(resp.entries) or None
            c.wait_until(seen, timeout=10)
        # ... and throttles the client on the partitions it leads.
        producer = FlatOut(c.bootstrap, "everywhere", "quota-spread", 3.0)
        producer.producer = Producer({"bootstrap.servers": c.bootstrap, "client.id": "everywhere",
                                      "linger.ms": 5, "log_level": 0,
                                      "throttle_cb": producer._throttled})
        producer.run()
        assert producer.throttled_by == leaders == {0, 1, 2}
