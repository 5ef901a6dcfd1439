"""Four members of one group, each its own OS process (tests/support/groups2_consumer.py),
on an 8-partition topic, with kafka-python's KafkaConsumer and with aiokafka's
AIOKafkaConsumer: every partition is owned by exactly one member; 20,000 keyed records flow
while one member is killed with kill -9; its partitions move to the other three once its
session (6 s, heartbeat 1 s) expires; nothing is lost, and the only records processed twice
are the killed member's uncommitted tail, re-read by the new owners from the offsets it had
committed."""
from __future__ import annotations

import pytest

from tests.support.groups2_scenario import HEARTBEAT_MS, SESSION_MS, run_kill9_scenario

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.parametrize("client,prefix", [("kafka-python", "kp"), ("aiokafka", "aio")])
@pytest.mark.parametrize("victim", ["follower", "leader"])
def test_group_survives_kill9_of_a_member(broker, tmp_path, client, prefix, victim):
    """The killed member is the group leader (the member that computed the assignment and
    joined first) or one of the others."""
    r = run_kill9_scenario(broker.bootstrap, tmp_path, client, f"{prefix}-{victim}", victim == "leader")
    print(f"{client}, {victim} killed: partitions {r.victim_partitions} moved {r.move_s:.2f}s after kill -9 "
          f"(rebalance began after {r.rebalance_start_s:.2f}s); the victim had processed "
          f"{r.victim_records} records ({r.tail_at_kill} uncommitted), {r.duplicates} re-read {r.duplicates_by_partition}; "
          f"assignment {r.initial_assignment} -> {r.final_assignment}")
    session, heartbeat = SESSION_MS / 1000, HEARTBEAT_MS / 1000
    # The coordinator notices the death only when the session expires, a session after the
    # victim's last heartbeat (sent at most a heartbeat interval before the kill); each
    # survivor learns of the rebalance from its next heartbeat, and the rebalance completes
    # once all three have rejoined. 4 s of slack for that and a loaded CI machine.
    assert session - heartbeat - 0.5 <= r.move_s <= session + 4, r.move_s
