"""A small network of Linux network namespaces for partition tests (root only).

Every "host" is a namespace with one veth into a bridge that lives in a namespace of its
own (the "switch"); the test process in the root namespace is one more port on that switch,
with one address per client: `CLIENT` (.254, the one its sockets use unless they bind
another) and any extra clients asked for (.253, .252, ...: a socket bound to one of them
is that client). A client reaches every host unless a fault names it. Faults are iptables
DROP rules in the switch's FORWARD chain (bridged frames pass it through br_netfilter), all
rewritten at once with iptables-restore, so:

- a cut drops packets silently, as most real partitions do: no RST, no ICMP, no EPERM on the
  sender; or, asked for (`reject=True`), refuses them as a rejecting firewall does: the
  sender's connects fail at once with "connection refused", which looks like a dead process;
- every fault lives in namespaces this module made: nothing touches the root namespace's
  rules, routes or other interfaces except the one veth and its /24 address.

    with Network.create(["zk", "b0", "b1", "b2"]) as net:
        subprocess.Popen(net.command("b0", ["python", "-m", "broker", "b0.properties"]))
        net.isolate("b0")                  # b0 cut from every host (clients still reach it)
        net.isolate("b0", clients=[CLIENT])  # ... and from the client too
        net.cut_one_way("b1", "b2")        # b1's packets to b2 dropped, b2's to b1 pass
        net.partition(["b0"], ["zk", "b2"])
        net.partition(["b0", "minority"], ["zk", "b1", "b2", CLIENT])  # with extra_clients=["minority"]
        net.bridge(["b0"], "b1", ["b2"])   # b0 and b2 cut from each other, b1 sees both
        net.heal()

`Cuts` is the pure model (which directed links drop, and the rules that say so); `Network`
owns the namespaces and applies it. Names are unique per process and network, so parallel
runs cannot collide; `close()` (or leaving the `with`) removes everything, and `create`
first removes networks left behind by processes that died without closing theirs.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

CLIENT = "client"           # the root namespace's first address: the test process's clients
CHAIN = "STROM-CUTS"        # the switch's chain of DROP rules, jumped to from FORWARD
NETNS_PREFIX = "strom-"     # namespace names: strom-<pid>-<seq>-<host>
SWITCH = "switch"
SUBNET_BASE = "10.213"      # host networks are 10.213.<k>.0/24, one free <k> per network
CLIENT_OCTET = 254          # clients count down from .254, hosts up from .1
SWITCH_OCTET = 200          # the switch's own address: a REJECT's reset is routed from it
DROP, REJECT = "drop", "reject"
LOCK_PATH = Path("/run/lock/strom-netns.lock")
OWNERS = Path("/run/lock/strom-netns")   # <tag>: the creator's pid namespace, while it lives
_LABEL = re.compile(r"^[a-z][a-z0-9]{0,11}$")


class NetnsUnavailable(RuntimeError):
    """This machine cannot make the network (not root, no `ip`/`iptables`, no br_netfilter)."""


def unavailable_reason() -> str | None:
    """Why `Network.create` cannot work here, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables", "iptables-restore", "sysctl"):
        if _which(tool) is None:
            return f"`{tool}` is not installed (apt-get install -y iproute2 iptables procps)"
    return None


def _which(tool: str) -> str | None:
    # root's tools live in sbin, which a test runner's PATH may lack
    return shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


# ---- the model ------------------------------------------------------------------------------


@dataclass
class Cuts:
    """The directed links that are cut: (src, dst) means src's packets to dst are lost
    (DROP: silently, as in most partitions) or refused (REJECT: a TCP reset back to src, as a
    firewall that rejects; src's connects fail at once with "connection refused"). Names are
    the network's hosts and clients. Operations add to what is cut (a later one decides a
    link's kind); `heal` clears everything."""

    hosts: tuple[str, ...]
    clients: tuple[str, ...] = (CLIENT,)
    links: dict[tuple[str, str], str] = field(default_factory=dict)    # (src, dst) -> DROP | REJECT

    @property
    def cut_links(self) -> set[tuple[str, str]]:
        return set(self.links)

    def _known(self, *names: str) -> None:
        for n in names:
            if n not in self.hosts and n not in self.clients:
                raise KeyError(f"no host or client {n!r} in this network "
                               f"({', '.join(self.hosts + self.clients)})")

    def cut_one_way(self, src: str, dst: str, reject: bool = False) -> None:
        self._known(src, dst)
        if src == dst:
            raise ValueError("a host cannot be cut from itself")
        self.links[(src, dst)] = REJECT if reject else DROP

    def cut(self, a: str, b: str, reject: bool = False) -> None:
        self.cut_one_way(a, b, reject)
        self.cut_one_way(b, a, reject)

    def partition(self, group1: Iterable[str], group2: Iterable[str], reject: bool = False) -> None:
        """Every host of group1 cut from every host of group2, both ways; hosts in neither
        group keep seeing both sides."""
        g1, g2 = list(group1), list(group2)
        if set(g1) & set(g2):
            raise ValueError(f"groups overlap: {sorted(set(g1) & set(g2))}")
        for a in g1:
            for b in g2:
                self.cut(a, b, reject)

    def isolate(self, host: str, clients: Iterable[str] = (), reject: bool = False) -> None:
        """`host` cut from every other host, and from `clients`."""
        self._known(host)
        self.partition([host], [h for h in self.hosts if h != host] + list(clients), reject)

    def bridge(self, left: Sequence[str], middle: str, right: Sequence[str], reject: bool = False) -> None:
        """Jepsen's bridge: `left` and `right` cut from each other, `middle` sees both."""
        if middle in left or middle in right:
            raise ValueError(f"the bridge host {middle!r} cannot be on a side")
        self._known(middle)
        self.partition(left, right, reject)

    def heal(self) -> None:
        self.links.clear()

    def reaches(self, src: str, dst: str) -> bool:
        return (src, dst) not in self.links

    def restore_script(self, ips: dict[str, str]) -> str:
        """iptables-restore input (for --noflush) that replaces the chain's rules with those
        of the cut links; declaring the chain flushes it in the same commit."""
        lines = ["*filter", f":{CHAIN} - [0:0]"]
        for (src, dst), kind in sorted(self.links.items()):
            match = f"-A {CHAIN} -s {ips[src]}/32 -d {ips[dst]}/32"
            if kind == DROP:
                lines.append(f"{match} -j DROP")
            else:
                lines.append(f"{match} -p tcp -j REJECT --reject-with tcp-reset")
                lines.append(f"{match} -j REJECT --reject-with icmp-port-unreachable")
        lines += ["COMMIT", ""]
        return "\n".join(lines)


# ---- the namespaces -------------------------------------------------------------------------


def _run(argv: Sequence[str], stdin: str | None = None, check: bool = True) -> str:
    r = subprocess.run([_which(argv[0]) or argv[0], *argv[1:]], input=stdin, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _netns_names() -> list[str]:
    # `ip netns list` prints "name (id: N)" for namespaces with an id
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines() if line.strip()]


def _kill_netns_processes(ns: str) -> None:
    """SIGKILL what still runs inside one of our namespaces (it would keep it alive)."""
    for pid in _run(["ip", "netns", "pids", ns], check=False).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _pid_namespace() -> str:
    return os.readlink("/proc/self/ns/pid")


def sweep_stale() -> list[str]:
    """Remove networks whose creating process is gone (a test run killed before its clean-up);
    returns the namespaces removed. Only namespaces named by this module, whose owner file
    says they were made in this pid namespace (so that their pid is one this process can
    look up), are considered."""
    removed = []
    for ns in _netns_names():
        m = re.match(rf"^{NETNS_PREFIX}((\d+)-\d+)-", ns)
        if not m or _pid_alive(int(m.group(2))):
            continue
        owner = OWNERS / m.group(1)
        try:
            if owner.read_text() != _pid_namespace():
                continue
        except OSError:
            continue                    # made elsewhere, or already being removed
        _kill_netns_processes(ns)
        _run(["ip", "netns", "del", ns], check=False)
        removed.append(ns)
    for ns in removed:
        (OWNERS / ns[len(NETNS_PREFIX):].rsplit("-", 1)[0]).unlink(missing_ok=True)
    return removed


def _subnets_in_use() -> set[int]:
    """The <k> of every 10.213.<k>.x address or route in the root namespace."""
    used = set()
    text = _run(["ip", "-4", "-o", "addr", "show"]) + _run(["ip", "-4", "route", "show"])
    for m in re.finditer(rf"\b{re.escape(SUBNET_BASE)}\.(\d+)\.\d+", text):
        used.add(int(m.group(1)))
    return used


_seq_lock = threading.Lock()
_seq = 0


def _next_seq() -> int:
    global _seq
    with _seq_lock:
        _seq += 1
        return _seq


@dataclass(frozen=True)
class Host:
    name: str       # the label given to Network.create
    netns: str      # the namespace's name (for `ip netns exec`)
    ip: str


class Network:
    """Hosts on one switch, faults between them, and the way to run processes on them.
    Thread-safe: faults may be applied from a thread other than the one that made it."""

    def __init__(self, tag: str, subnet: int, hosts: dict[str, Host], clients: Sequence[str],
                 client_veth: str):
        self.tag = tag
        self.subnet = subnet
        self.hosts = hosts
        self.client_veth = client_veth
        self.client_ips = {c: f"{SUBNET_BASE}.{subnet}.{CLIENT_OCTET - i}" for i, c in enumerate(clients)}
        self.client_ip = self.client_ips[CLIENT]
        self.switch_netns = f"{NETNS_PREFIX}{tag}-{SWITCH}"
        self.cuts = Cuts(tuple(hosts), tuple(clients))
        self._lock = threading.Lock()
        self.closed = False

    # ---- making and removing ------------------------------------------------------------

    @classmethod
    def create(cls, names: Sequence[str], extra_clients: Sequence[str] = ()) -> "Network":
        """Namespaces for `names` (short lowercase labels, e.g. "zk", "b0"), each with its own
        address 10.213.<k>.<1..n>/24, the switch, and the root namespace's port with an
        address for CLIENT and each of `extra_clients`; NetnsUnavailable when this machine
        cannot. Partial work is undone when a step fails."""
        reason = unavailable_reason()
        if reason:
            raise NetnsUnavailable(reason)
        every = [*names, *extra_clients]
        if len(set(every)) != len(every) or not names:
            raise ValueError(f"host and client names must be distinct, and one host at least: {every}")
        for n in every:
            if not _LABEL.match(n) or n in (CLIENT, SWITCH):
                raise ValueError(f"bad name {n!r}: lowercase letters and digits, "
                                 f"at most 12, not {CLIENT!r} or {SWITCH!r}")
        if len(names) >= SWITCH_OCTET or len(extra_clients) >= CLIENT_OCTET - SWITCH_OCTET - 1:
            raise ValueError("too many hosts or clients for one /24")
        sweep_stale()
        tag = f"{os.getpid()}-{_next_seq()}"
        LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK_PATH, "w") as lock:
            # Choosing a free subnet and taking it (the client's address) is one step
            # for every process that makes networks.
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _subnets_in_use()
            free = [k for k in range(256) if k not in used]
            if not free:
                raise NetnsUnavailable(f"every {SUBNET_BASE}.<k>.0/24 is in use")
            subnet = free[0]
            hosts = {n: Host(n, f"{NETNS_PREFIX}{tag}-{n}", f"{SUBNET_BASE}.{subnet}.{i + 1}")
                     for i, n in enumerate(names)}
            net = cls(tag, subnet, hosts, [CLIENT, *extra_clients],
                      client_veth=f"st{tag.replace('-', 'x')}"[:15])
            OWNERS.mkdir(parents=True, exist_ok=True)
            (OWNERS / tag).write_text(_pid_namespace())
            try:
                net._build()
            except BaseException:
                net.close()
                raise
        return net

    def _build(self) -> None:
        sw = self.switch_netns
        _run(["ip", "netns", "add", sw])
        _run(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", sw, "addr", "add", f"{SUBNET_BASE}.{self.subnet}.{SWITCH_OCTET}/24", "dev", "br0"])
        _run(["ip", "-n", sw, "link", "set", "br0", "up"])
        self._enable_bridge_filtering()
        _run(["ip", "netns", "exec", sw, "iptables-restore", "--noflush"],
             stdin=f"*filter\n:{CHAIN} - [0:0]\n-A FORWARD -j {CHAIN}\nCOMMIT\n")
        for i, host in enumerate(self.hosts.values()):
            _run(["ip", "netns", "add", host.netns])
            _run(["ip", "link", "add", "eth0", "netns", host.netns, "type", "veth",
                  "peer", "name", f"p{i}", "netns", sw])
            _run(["ip", "-n", sw, "link", "set", f"p{i}", "master", "br0", "up"])
            _run(["ip", "-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", "eth0"])
            _run(["ip", "-n", host.netns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", host.netns, "link", "set", "lo", "up"])
        _run(["ip", "link", "add", self.client_veth, "type", "veth", "peer", "name", "pclient",
              "netns", sw])
        _run(["ip", "-n", sw, "link", "set", "pclient", "master", "br0", "up"])
        for ip in self.client_ips.values():       # the first added is the one sockets use
            _run(["ip", "addr", "add", f"{ip}/24", "dev", self.client_veth])
        _run(["ip", "link", "set", self.client_veth, "up"])

    def _enable_bridge_filtering(self) -> None:
        """Bridged frames must pass the switch's iptables (br_netfilter); else no cut works."""
        knob = "net.bridge.bridge-nf-call-iptables"
        out = _run(["ip", "netns", "exec", self.switch_netns, "sysctl", "-w", f"{knob}=1"], check=False)
        if "= 1" not in out:
            _run(["modprobe", "br_netfilter"], check=False)
            out = _run(["ip", "netns", "exec", self.switch_netns, "sysctl", "-w", f"{knob}=1"],
                       check=False)
        if "= 1" not in out:
            raise NetnsUnavailable(f"{knob} cannot be set (no br_netfilter module): "
                                   f"iptables would not see bridged traffic")

    def close(self) -> None:
        """Remove the client's veth and every namespace of this network (killing anything
        still running in them first). Safe to call twice and after a failed create."""
        self.closed = True
        _run(["ip", "link", "del", self.client_veth], check=False)
        ours = set(_netns_names())
        for ns in [h.netns for h in self.hosts.values()] + [self.switch_netns]:
            if ns in ours:
                _kill_netns_processes(ns)
                _run(["ip", "netns", "del", ns], check=False)
        (OWNERS / self.tag).unlink(missing_ok=True)

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- running processes --------------------------------------------------------------

    def ip(self, host: str) -> str:
        """The address of a host, or of a client (on the root namespace's port)."""
        return self.client_ips[host] if host in self.client_ips else self.hosts[host].ip

    def _ips(self) -> dict[str, str]:
        return {**{n: h.ip for n, h in self.hosts.items()}, **self.client_ips}

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """`argv` run inside `host`'s namespace (`ip netns exec` execs it: same pid)."""
        return [_which("ip") or "ip", "netns", "exec", self.hosts[host].netns, *argv]

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        return subprocess.Popen(self.command(host, argv), **kwargs)

    def run(self, host: str, argv: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(host, argv), capture_output=True, text=True,
                              timeout=timeout)

    # ---- faults -------------------------------------------------------------------------

    def _apply(self) -> None:
        _run(["ip", "netns", "exec", self.switch_netns, "iptables-restore", "--noflush"],
             stdin=self.cuts.restore_script(self._ips()))

    # Each fault is the Cuts operation of that name, applied at once; `reject` refuses
    # instead of dropping.

    def isolate(self, host: str, clients: Iterable[str] = (), reject: bool = False) -> None:
        with self._lock:
            self.cuts.isolate(host, clients, reject)
            self._apply()

    def cut(self, a: str, b: str, reject: bool = False) -> None:
        with self._lock:
            self.cuts.cut(a, b, reject)
            self._apply()

    def cut_one_way(self, src: str, dst: str, reject: bool = False) -> None:
        with self._lock:
            self.cuts.cut_one_way(src, dst, reject)
            self._apply()

    def partition(self, group1: Iterable[str], group2: Iterable[str], reject: bool = False) -> None:
        with self._lock:
            self.cuts.partition(group1, group2, reject)
            self._apply()

    def bridge(self, left: Sequence[str], middle: str, right: Sequence[str], reject: bool = False) -> None:
        with self._lock:
            self.cuts.bridge(left, middle, right, reject)
            self._apply()

    def heal(self) -> None:
        with self._lock:
            self.cuts.heal()
            self._apply()

    def rules(self) -> str:
        """The switch's current rules as iptables prints them (for reports)."""
        return _run(["ip", "netns", "exec", self.switch_netns, "iptables", "-S", CHAIN])

    def reaches(self, src: str, dst: str) -> bool:
        return self.cuts.reaches(src, dst)

