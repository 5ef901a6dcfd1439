"""broker/testing/netns.py on this machine: real namespaces, a real bridge and iptables in
the switch's namespace. Each test checks a fault with TCP connections between processes
running inside the namespaces, and that everything is gone after close(). Needs root: a
skip outside CI, a failure under CI (CI=true)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.testing.netns import CLIENT, Network, sweep_stale
from tests.support.netns import require_netns

pytestmark = pytest.mark.integration

PORT = 7000
# A listener that answers each connection with the caller's address and closes it.
SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
while True:
    c, a = s.accept()
    c.sendall(a[0].encode())
    c.close()
"""
CONNECT = """
import socket, sys
try:
    print(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.5).recv(100).decode())
except OSError as e:
    print(type(e).__name__)
"""


@pytest.fixture
def net():
    require_netns()
    n = Network.create(["a", "b", "c"], extra_clients=["other"])
    servers = [n.popen(h, [sys.executable, "-c", SERVER, n.ip(h), str(PORT)]) for h in ("a", "b", "c")]
    try:
        deadline = time.monotonic() + 10
        while not all(answer(n, CLIENT, h) == n.client_ip for h in ("a", "b", "c")):
            assert time.monotonic() < deadline, "servers in the namespaces never answered"
            time.sleep(0.05)
        yield n
    finally:
        for s in servers:
            s.kill()
            s.wait(5)
        n.close()


def answer(n: Network, src: str, dst: str) -> str:
    """What `src` gets when it connects to `dst`'s server: dst's view of src's address, or
    the error's name (TimeoutError for a dropped connection)."""
    if src in n.client_ips:
        try:
            with socket.create_connection((n.ip(dst), PORT), timeout=0.5,
                                          source_address=(n.ip(src), 0)) as s:
                return s.recv(100).decode()
        except OSError as e:
            return type(e).__name__
    return n.run(src, [sys.executable, "-c", CONNECT, n.ip(dst), str(PORT)]).stdout.strip()


def reach_matrix(n: Network) -> set[tuple[str, str]]:
    """The (src, dst) pairs that connect, probed at once (a dropped one waits its timeout)."""
    pairs = [(s, d) for s in ("a", "b", "c", CLIENT) for d in ("a", "b", "c") if s != d]
    with ThreadPoolExecutor(len(pairs)) as pool:
        answers = list(pool.map(lambda sd: answer(n, *sd), pairs))
    return {sd for sd, got in zip(pairs, answers) if got == n.ip(sd[0])}


ALL = {(s, d) for s in ("a", "b", "c", CLIENT) for d in ("a", "b", "c") if s != d}


def test_hosts_and_clients_reach_each_other_from_their_own_addresses(net):
    assert reach_matrix(net) == ALL
    assert answer(net, "other", "a") == net.ip("other")
    assert len({net.ip(h) for h in ("a", "b", "c", CLIENT, "other")}) == 5
    # A socket that binds no address is CLIENT.
    with socket.create_connection((net.ip("a"), PORT), timeout=0.5) as s:
        assert s.recv(100).decode() == net.client_ip


def test_isolate_then_heal(net):
    net.isolate("a")
    assert reach_matrix(net) == ALL - {("b", "a"), ("c", "a"), ("a", "b"), ("a", "c")}
    assert answer(net, "a", "b") == "TimeoutError"       # dropped, not refused
    net.heal()
    assert reach_matrix(net) == ALL


def test_isolate_from_a_client(net):
    net.isolate("b", clients=[CLIENT])
    assert answer(net, CLIENT, "b") == "TimeoutError"
    assert answer(net, CLIENT, "a") == net.client_ip
    assert answer(net, "other", "b") == net.ip("other")     # the other client still reaches it



def test_one_way_cut_breaks_tcp_from_both_ends_but_only_drops_one_direction(net):
    # TCP needs both directions: a connection either way fails, yet the rule is one-way.
    net.cut_one_way("a", "b")
    m = reach_matrix(net)
    assert ("a", "b") not in m and ("b", "a") not in m
    assert {("a", "c"), ("c", "a"), ("b", "c"), ("c", "b")} <= m
    assert net.rules().count("-j DROP") == 1


def test_reject_refuses_at_once_instead_of_dropping(net):
    net.cut("a", "b", reject=True)
    assert answer(net, "a", "b") == "ConnectionRefusedError"
    assert answer(net, "b", "a") == "ConnectionRefusedError"
    assert answer(net, "a", "c") == net.ip("a")


def test_bridge(net):
    net.bridge(["a"], "b", ["c"])
    assert reach_matrix(net) == ALL - {("a", "c"), ("c", "a")}


def test_close_removes_namespaces_and_the_client_port():
    require_netns()
    n = Network.create(["x"])
    proc = n.popen("x", ["sleep", "60"])
    n.close()
    assert proc.wait(5) == -9                      # what still ran inside was ended
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert n.switch_netns not in listed and n.hosts["x"].netns not in listed
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f" {n.client_veth}@" not in links and f" {n.client_veth}:" not in links


def test_a_network_left_by_a_killed_process_is_swept():
    require_netns()
    maker = subprocess.Popen(
        [sys.executable, "-c", "import time; from broker.testing.netns import Network; "
                               "n = Network.create(['x']); print(n.hosts['x'].netns, flush=True); "
                               "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert maker.stdout is not None
    left = maker.stdout.readline().strip()
    maker.kill()                                   # no close(): its namespaces stay behind
    maker.wait(5)
    assert left in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert left in sweep_stale()
    assert left not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
