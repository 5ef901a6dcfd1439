"""Replica assignment as Kafka's AdminUtils does it: leaders round-robin, followers shifted,
no broker twice in a partition; with racks, each partition's replicas span as many racks as
they can."""
from __future__ import annotations

from collections import Counter

import pytest

from broker.topic_admin import assign_rack_aware, assign_round_robin


@pytest.mark.parametrize("n,rf", [(1, 1), (3, 1), (3, 2), (3, 3), (5, 3), (6, 4)])
def test_round_robin_distinct_replicas_and_balanced_leaders(n, rf):
    a = assign_round_robin(0, 6 * n, rf, list(range(n)))
    assert all(len(set(r)) == len(r) == rf for r in a.values())
    leaders = Counter(r[0] for r in a.values())
    assert set(leaders.values()) == {6}                    # every broker leads equally
    replicas = Counter(b for r in a.values() for b in r)
    assert max(replicas.values()) - min(replicas.values()) <= 1


def test_round_robin_continues_for_new_partitions():
    whole = assign_round_robin(0, 9, 2, [0, 1, 2])
    assert {**assign_round_robin(0, 4, 2, [0, 1, 2]), **assign_round_robin(4, 5, 2, [0, 1, 2])} == whole


@pytest.mark.parametrize("racks,rf", [
    ({0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}, 3),
    ({0: "a", 1: "a", 2: "b", 3: "b"}, 2),
    ({0: "a", 1: "a", 2: "a", 3: "b"}, 3),
    ({0: "a", 1: "b", 2: "c"}, 2),
])
def test_rack_aware_spreads_each_partition_over_racks(racks, rf):
    n_racks = len(set(racks.values()))
    a = assign_rack_aware(0, 4 * len(racks), rf, racks)
    for p, replicas in a.items():
        assert len(set(replicas)) == rf, (p, replicas)
        assert len({racks[b] for b in replicas}) == min(rf, n_racks), (p, replicas)
    leaders = Counter(r[0] for r in a.values())
    assert set(leaders.values()) == {4}
