"""A transactional client call that blocks past its timeout is ended by the CallWatchdog.

A CI run of test_txn_exactly_once.py failed with the application silent for 300 s: its
send_offsets_to_transaction was waiting for a group coordinator that had been killed. strom
fences a killed broker at once, its Metadata answers stop listing it, and librdkafka 2.16
decommissions it while its coordinator lookup still waits for it; that lookup is never woken
and its timeout is never checked (librdkafka issues #5456, #5511). send_offsets_probe.py
walks into exactly that state; the watchdog that ctp_app.py also runs under must end the
call (a restart is what recovers the application), or the call returns by itself once
librdkafka is fixed. Without the watchdog the probe blocks until this test's deadline.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.chaos.call_watchdog import EXIT_CODE, GRACE_S
from tests.chaos.ctp_run import ROOT, TRANSACTIONAL_ID, create_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CALL_TIMEOUT_S = 5.0
GROUP_KEY, TXN_KEY = 0, 1       # FindCoordinator key types


def coordinator(cluster, key: str, key_type: int) -> int | None:
    """The broker a running broker names as coordinator of `key` (FindCoordinator creates
    the internal topic on first use); None while none can."""
    for i, b in enumerate(cluster.brokers):
        if cluster.running(i):
            try:
                r = cluster.request(b.port, "FindCoordinator", 3, {"key": key, "key_type": key_type})
            except Exception:
                continue
            if r.error_code == 0:
                return r.node_id
    return None


def wait_for_coordinator(cluster, key: str, key_type: int, other_than: int | None = None) -> int:
    def found() -> tuple[int] | None:
        node = coordinator(cluster, key, key_type)
        return (node,) if node is not None and node != other_than else None     # broker 0 is falsy
    return cluster.wait_until(found, 30, message=f"a coordinator of {key!r} other than {other_than}")[0]


def group_not_coordinated_by(cluster, broker: int) -> str:
    """A group whose coordinator is not `broker`: the death of the transaction coordinator
    too would wake librdkafka's waiting lookup (the client reconnects elsewhere meanwhile)."""
    for n in range(100):
        group = f"probe-{n}"
        if wait_for_coordinator(cluster, group, GROUP_KEY) != broker:
            return group
    raise AssertionError(f"every group tried is coordinated by broker {broker}")


def test_send_offsets_blocked_on_a_killed_group_coordinator_is_ended_by_the_watchdog(cluster, tmp_path):
    create_topics(cluster)
    txn_coordinator = wait_for_coordinator(cluster, TRANSACTIONAL_ID, TXN_KEY)
    group = group_not_coordinated_by(cluster, txn_coordinator)
    victim = wait_for_coordinator(cluster, group, GROUP_KEY)
    output = tmp_path / "probe.out"
    with open(output, "w") as out:
        probe = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "chaos" / "send_offsets_probe.py"), "--bootstrap",
             cluster.bootstrap, "--group", group, "--transactional-id", TRANSACTIONAL_ID,
             "--call-timeout", str(CALL_TIMEOUT_S), "--debug", os.environ.get("STROM_CTP_DEBUG", "")],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        cluster.wait_until(lambda: "probe: committed" in output.read_text() or probe.poll() is not None, 60,
                           message="the probe's first transaction")
        assert probe.poll() is None, output.read_text()
        cluster.kill9(victim)
        wait_for_coordinator(cluster, group, GROUP_KEY, other_than=victim)
        started = time.monotonic()
        assert probe.stdin is not None
        probe.stdin.write("go\n")
        probe.stdin.flush()
        bound = CALL_TIMEOUT_S + GRACE_S + 30       # the call, the watchdog's grace, a loaded machine
        try:
            code = probe.wait(bound)
        except subprocess.TimeoutExpired:
            pytest.fail(f"send_offsets_to_transaction (timeout {CALL_TIMEOUT_S:.0f} s) still blocks after "
                        f"{bound:.0f} s:\n{output.read_text()}")
        took = time.monotonic() - started
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    text = output.read_text()
    assert code in (0, EXIT_CODE), text
    said = [line for line in text.splitlines() if line.startswith("probe:")]
    print(f"\ngroup coordinator {victim} killed (transaction coordinator {txn_coordinator}); the probe ended "
          f"{took:.1f} s later, {'by the watchdog' if code == EXIT_CODE else 'by itself'}: {said[-1]}")
