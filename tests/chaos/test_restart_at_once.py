"""kill -9 of a partition leader and its restart with bin/kafka-server-start.sh AT ONCE (no
waiting for its ZooKeeper session to expire), three times in a row under acks=all load: the
broker starts each time (it ends its previous run's session instead of exiting with
BrokerIdInUseError), rejoins the ISR, and nothing acknowledged is lost.

The brokers' ZooKeeper sessions last 30 s (the test's ZooKeeper allows that much), far longer
than a broker takes to start even on a loaded machine, so each restart meets its previous
run's registration and must end that session (one line) rather than exit or wait it out.
Each round prints how long the restarted broker took to register in ZooKeeper and to be back
in the ISR of every partition. The default run does the 3 rounds the issue asks for; `--long`
does 10.
"""
from __future__ import annotations

import os
import random
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import stop_telling_a_failure
from tests.support.broker_process import REPO
from tests.support.cluster import Cluster
from tests.support.zk_process import ZooKeeperProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "restart-at-once"
PARTITIONS = 3
SESSION_MS = 30000


@pytest.fixture
def cluster(tmp_path, request):
    """The chaos cluster (3 brokers, replication factor 3, min.insync.replicas 2) with
    SESSION_MS sessions: its ZooKeeper's maxSessionTimeout (20 ticks by default) is raised."""
    c = Cluster(tmp_path / "cluster", brokers=3, zookeeper_session_timeout_ms=SESSION_MS)
    c.zookeeper = ZooKeeperProcess(tmp_path / "cluster" / "zookeeper", tick_time_ms=500,
                                   extra={"maxSessionTimeout": str(2 * SESSION_MS)})
    c.start()
    try:
        yield c
    finally:
        stop_telling_a_failure(c, request)


def start_with_the_script(cluster, i: int, data_dir) -> None:
    """Start broker i as an operator would: bin/kafka-server-start.sh with its properties file
    (the script execs the broker, so the process is the broker's). Its pid file goes to
    `data_dir`/run: every broker's config is named server.properties, so each needs its own."""
    b = cluster.broker(i)
    if getattr(b, "_log", None) is not None and not b._log.closed:
        b._log.close()
    b._log = open(b.log_path, "ab")
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", STROM_DATA_DIR=str(data_dir))
    b.proc = subprocess.Popen([str(REPO / "bin" / "kafka-server-start.sh"), str(b.config_path)],
                              cwd=REPO, env=env, stdout=b._log, stderr=subprocess.STDOUT)


def in_every_isr(cluster, i: int) -> bool:
    return all(i in cluster.isr(TOPIC, p) for p in range(PARTITIONS))


def test_kill9_and_restart_at_once_three_times(cluster, long_run, tmp_path):
    rounds = 10 if long_run else 3
    rng = random.Random(23)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    for p in range(PARTITIONS):
        cluster.wait_for_leader(TOPIC, p)
    checker = Checker()
    figures = []
    with ChaosProducer(cluster.bootstrap, TOPIC, checker, idempotence=True, keys=None, rate=3000,
                       config={"log_level": 0, "socket.connection.setup.timeout.ms": 1000,
                               "topic.metadata.refresh.interval.ms": 500}) as producer:
        for r in range(rounds):
            producer.wait_acked(checker.acked_count + 300, timeout=60)
            time.sleep(rng.uniform(0.1, 0.8))
            leader = cluster.leader(TOPIC, 0)
            assert leader is not None
            b = cluster.broker(leader)
            log_start = len(b.output())
            cluster.kill9(leader)
            t0 = time.monotonic()
            start_with_the_script(cluster, leader, tmp_path / f"data-{leader}")
            cluster.wait_until(lambda: "registered broker" in b.output()[log_start:] or None, timeout=30)
            registered = time.monotonic() - t0
            assert b.proc.poll() is None, b.output()[log_start:][-3000:]
            cluster.wait_until(lambda: in_every_isr(cluster, leader), timeout=60)
            rejoined = time.monotonic() - t0
            said = [ln for ln in b.output()[log_start:].splitlines() if "still registered" in ln]
            assert len(said) == 1 and "ending that session" in said[0], said
            assert registered < SESSION_MS / 1000, "waited for the old session instead of ending it"
            figures.append((registered, rejoined))
            print(f"round {r}: kill -9 of leader {leader} and restart at once: registered after "
                  f"{registered:.2f} s, back in the ISR of all {PARTITIONS} partitions after "
                  f"{rejoined:.2f} s; acked so far {checker.acked_count}; it said: "
                  f"{said[0].split(': ', 1)[-1]}")
        producer.wait_acked(checker.acked_count + 300, timeout=60)
    read_back(cluster.bootstrap, TOPIC, PARTITIONS, checker)
    report = checker.report()
    print(report)
    print(f"registration after restart: max {max(f[0] for f in figures):.2f} s; "
          f"back in every ISR: max {max(f[1] for f in figures):.2f} s over {rounds} rounds")
    report.assert_ok(min_acked=1000)
