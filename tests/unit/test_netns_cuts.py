"""The partition model of broker/testing/netns.py: which directed links each fault drops,
and the iptables-restore text that says so (no root needed)."""
import pytest

from broker.testing.netns import CHAIN, CLIENT, Cuts

HOSTS = ("zk", "b0", "b1", "b2")


def cuts() -> Cuts:
    return Cuts(HOSTS, (CLIENT, "minority"))


def test_isolate_cuts_a_host_from_every_other_host_both_ways_but_not_the_client():
    c = cuts()
    c.isolate("b0")
    assert c.cut_links == {(a, b) for h in ("zk", "b1", "b2") for a, b in (("b0", h), (h, "b0"))}
    assert c.reaches(CLIENT, "b0") and c.reaches("b0", CLIENT)
    assert c.reaches("b1", "b2") and c.reaches("zk", "b1")


def test_isolate_with_the_client_cuts_the_client_too():
    c = cuts()
    c.isolate("b1", clients=[CLIENT])
    assert not c.reaches(CLIENT, "b1") and not c.reaches("b1", CLIENT)
    assert c.reaches("minority", "b1")


def test_clients_can_be_put_on_either_side_of_a_partition():
    c = cuts()
    c.partition(["b0", "minority"], ["zk", "b1", "b2", CLIENT])
    assert c.reaches("minority", "b0") and not c.reaches("minority", "b1")
    assert c.reaches(CLIENT, "b1") and not c.reaches(CLIENT, "b0")


def test_cut_one_way_drops_one_direction_only():
    c = cuts()
    c.cut_one_way("b0", "b1")
    assert not c.reaches("b0", "b1")
    assert c.reaches("b1", "b0")


def test_partition_cuts_across_groups_and_leaves_others_seeing_both():
    c = cuts()
    c.partition(["b0", "zk"], ["b2"])
    assert not c.reaches("b0", "b2") and not c.reaches("b2", "zk")
    assert c.reaches("b0", "zk")                    # same side
    assert all(c.reaches("b1", h) and c.reaches(h, "b1") for h in ("b0", "zk", "b2"))


def test_bridge_cuts_the_sides_and_keeps_the_middle():
    c = cuts()
    c.bridge(["b0"], "b1", ["b2", "zk"])
    assert c.cut_links == {("b0", "b2"), ("b2", "b0"), ("b0", "zk"), ("zk", "b0")}
    with pytest.raises(ValueError):
        c.bridge(["b0"], "b0", ["b2"])


def test_faults_add_up_and_heal_clears_them():
    c = cuts()
    c.cut("zk", "b2")
    c.cut_one_way("b1", "b0")
    assert len(c.cut_links) == 3
    c.heal()
    assert not c.cut_links


def test_unknown_hosts_self_cuts_and_overlapping_groups_are_refused():
    c = cuts()
    with pytest.raises(KeyError):
        c.cut("b0", "b9")
    with pytest.raises(KeyError):
        Cuts(HOSTS).cut("b0", "minority")          # a client the network was not made with
    with pytest.raises(ValueError):
        c.cut("b0", "b0")
    with pytest.raises(ValueError):
        c.partition(["b0", "b1"], ["b1"])
    assert not c.cut_links


def test_restore_script_flushes_the_chain_and_drops_each_link_by_address():
    c = cuts()
    ips = {"zk": "10.0.0.1", "b0": "10.0.0.2", "b1": "10.0.0.3", "b2": "10.0.0.4", CLIENT: "10.0.0.254"}
    c.cut_one_way("b0", CLIENT)
    c.cut_one_way("b2", "b1")
    script = c.restore_script(ips)
    assert script.splitlines() == [
        "*filter",
        f":{CHAIN} - [0:0]",                         # declaring it flushes it under --noflush
        f"-A {CHAIN} -s 10.0.0.2/32 -d 10.0.0.254/32 -j DROP",
        f"-A {CHAIN} -s 10.0.0.4/32 -d 10.0.0.3/32 -j DROP",
        "COMMIT",
    ]
    c.heal()
    assert f"-A {CHAIN}" not in c.restore_script(ips)


def test_a_rejected_link_answers_tcp_with_a_reset_and_a_later_cut_decides_the_kind():
    c = cuts()
    ips = {"zk": "10.0.0.1", "b0": "10.0.0.2", "b1": "10.0.0.3", "b2": "10.0.0.4", CLIENT: "10.0.0.254",
           "minority": "10.0.0.253"}
    c.cut("b0", "b1", reject=True)
    assert not c.reaches("b0", "b1") and not c.reaches("b1", "b0")
    lines = c.restore_script(ips).splitlines()
    assert f"-A {CHAIN} -s 10.0.0.2/32 -d 10.0.0.3/32 -p tcp -j REJECT --reject-with tcp-reset" in lines
    assert not any(line.endswith("-j DROP") for line in lines)
    c.cut_one_way("b0", "b1")
    lines = c.restore_script(ips).splitlines()
    assert f"-A {CHAIN} -s 10.0.0.2/32 -d 10.0.0.3/32 -j DROP" in lines
    assert f"-A {CHAIN} -s 10.0.0.3/32 -d 10.0.0.2/32 -p tcp -j REJECT --reject-with tcp-reset" in lines
