"""ProcessWatch against real sockets on 127.0.0.1: a closed listener is death, a listener that
accepts (even one that never reads) is not, and "localhost" resolving to two addresses is
judged on both."""
from __future__ import annotations

import asyncio
import socket

import pytest

from zkcoord.liveness import ProcessWatch, RevivalWatch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(backlog: int) -> socket.socket:
    """A non-blocking listener on a free loopback port, accepted from by the test itself."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    listener.setblocking(False)
    return listener


async def _watch_until(host: str, port: int, seconds: float) -> bool:
    died = asyncio.Event()
    w = ProcessWatch("test", host, port, died.set, probe_timeout_s=1.0, retry_s=0.2).start()
    try:
        await asyncio.wait_for(died.wait(), seconds)
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        w.stop()


def test_nothing_listening_is_death():
    assert asyncio.run(_watch_until("127.0.0.1", free_port(), 2.0))


def test_localhost_with_nothing_listening_is_death():
    assert asyncio.run(_watch_until("localhost", free_port(), 2.0))


@pytest.mark.alone
def test_a_listener_that_closes_is_seen_at_once():
    async def scenario() -> tuple[bool, float]:
        accepted: list[asyncio.StreamWriter] = []
        server = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        died = asyncio.Event()
        w = ProcessWatch("test", "127.0.0.1", port, died.set, retry_s=0.2).start()
        await asyncio.sleep(0.5)
        alive_while_listening = not died.is_set()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        server.close()               # the listener and the accepted connection go, as on kill -9
        for writer in accepted:
            writer.close()
        await asyncio.wait_for(died.wait(), 3.0)
        w.stop()
        return alive_while_listening, loop.time() - t0
    alive, took = asyncio.run(scenario())
    assert alive
    assert took < 1.5


def test_a_listener_that_never_reads_is_not_death():
    """A paused process: the kernel still completes handshakes on its listening socket."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)                 # never accept(): like a SIGSTOPped broker
        port = listener.getsockname()[1]
        assert not asyncio.run(_watch_until("127.0.0.1", port, 1.5))


def test_a_revival_watch_waits_for_refusals_to_end_then_reports_once():
    """A fenced broker's address refuses until its listener answers again (a firewall went)."""
    async def scenario() -> tuple[bool, bool, int]:
        port = free_port()
        alive: list[bool] = []
        w = RevivalWatch("test", "127.0.0.1", port, lambda: alive.append(True), retry_s=0.1).start()
        await asyncio.sleep(0.5)
        quiet_while_refused = not alive
        server = await asyncio.start_server(lambda r, wr: wr.close(), "127.0.0.1", port)
        for _ in range(30):
            if alive:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        server.close()
        return quiet_while_refused, not w.running, len(alive)
    quiet, done, reports = asyncio.run(scenario())
    assert quiet and done and reports == 1


@pytest.mark.alone
def test_a_process_dying_as_the_watch_reconnects_is_seen_at_once():
    """kill -9 closes a process's connections a moment before its listener: the watch's next
    connect can still complete (the kernel queues it on the listener), and is reset at once
    when the listener goes. That reset is the death itself, not a listener that sheds
    connections: seen on the next connect, not one retry pause (1 s) later. Before the fix a
    new controller fenced its dead predecessor a second late, and topics created meanwhile
    waited that second for their leaders (test_controller_startup.py, under load)."""
    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        listener = _listening(backlog=8)
        died = asyncio.Event()
        w = ProcessWatch("test", "127.0.0.1", listener.getsockname()[1], died.set).start()
        first, _ = await asyncio.wait_for(loop.sock_accept(listener), 2.0)
        await asyncio.sleep(1.1)           # a watched connection of long standing
        t0 = loop.time()
        first.close()                      # the process's connections go first ...
        await asyncio.sleep(0.1)           # ... the watch reconnects into the backlog ...
        listener.close()                   # ... and the listener goes: that connection is reset
        await asyncio.wait_for(died.wait(), 3.0)
        w.stop()
        return loop.time() - t0
    assert asyncio.run(scenario()) < 0.5


def test_a_listener_that_closes_every_connection_at_once_is_not_death_nor_spun_on():
    """A connection quota: each connect is accepted and closed at once. Not death, and after
    the one immediate look again the watch waits its retry pause between connects."""
    async def scenario() -> tuple[bool, int]:
        connects = 0

        def shed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connects
            connects += 1
            writer.close()
        server = await asyncio.start_server(shed, "127.0.0.1", 0)
        died = asyncio.Event()
        w = ProcessWatch("test", "127.0.0.1", server.sockets[0].getsockname()[1], died.set,
                         retry_s=0.2).start()
        await asyncio.sleep(1.0)
        w.stop()
        server.close()
        return died.is_set(), connects
    died, connects = asyncio.run(scenario())
    assert not died
    assert 2 <= connects <= 8       # about one a pause (0.2 s) over 1 s, not hundreds


@pytest.mark.alone
def test_a_connect_that_fails_right_after_the_watched_connection_ended_is_retried_soon():
    """The reconnect can also fail without a refusal while the process dies (reset, or no
    answer at all): that is no reason to pause a whole second before the look that finds
    the refusal. Here the listener's queue is full when the watched connection ends, so the
    reconnect times out; then the listener goes. Seen in CI: a new controller fenced its
    dead predecessor 1 s late and topics waited that second for leaders."""
    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        listener = _listening(backlog=0)
        port = listener.getsockname()[1]
        died = asyncio.Event()
        w = ProcessWatch("test", "127.0.0.1", port, died.set, probe_timeout_s=0.3).start()
        first, _ = await asyncio.wait_for(loop.sock_accept(listener), 2.0)
        await asyncio.sleep(1.1)           # a watched connection of long standing
        fillers = []
        for _ in range(4):                 # fill the accept queue: later SYNs are dropped
            f = socket.socket()
            f.setblocking(False)
            try:
                f.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(f)
        await asyncio.sleep(0.1)
        t0 = loop.time()
        first.close()                      # the watch reconnects and hangs: no answer
        await asyncio.sleep(0.1)
        listener.close()                   # then the listener goes
        await asyncio.wait_for(died.wait(), 5.0)
        w.stop()
        for f in fillers:
            f.close()
        return loop.time() - t0
    assert asyncio.run(scenario()) < 0.8   # probe timeout 0.3 s, then a quick look
