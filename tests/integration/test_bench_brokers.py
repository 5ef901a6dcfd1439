"""The benchmarks' strom brokers are plain `python -m broker` processes, as a user starts
them: children of the benchmark, in its session. Forked from the test suite's zygote a broker
starts a session of its own, and with the kernel's autogroup scheduling that gave each
broker its own share of the CPU against the benchmark's clients (the 50 MB/s latency tail
~40 % longer), while `--broker-repo` brokers were plain processes: the two sides of a
before/after were started differently."""
from __future__ import annotations

import os

import pytest

import tests.support.broker_process as bp
from bench._common import StromBroker

pytestmark = pytest.mark.integration


def test_a_benchmarks_broker_is_a_plain_child_in_the_benchmarks_session(tmp_path, monkeypatch):
    monkeypatch.setattr(bp, "USE_ZYGOTE", True)      # as the test suite leaves it
    broker = StromBroker(tmp_path)
    try:
        pid = broker.pids()[0]
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
        assert parent == os.getpid(), "forked by another process (the zygote?)"
        assert os.getsid(pid) == os.getsid(0), "a session (and autogroup) of its own"
    finally:
        broker.close()
