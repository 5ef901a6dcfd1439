"""A TCP proxy in front of ZooKeeper that can lose the answer to one write.

Brokers pointed at it (zookeeper.connect) talk to the real server through it. Armed with a
path suffix, it forwards the next SetData request on such a path to the server and, when
the server's reply to it arrives, closes that client's connection instead of passing the
reply on: the write landed, the client never heard. The client reconnects (same session)
and sees a connection loss for that request, as with a network fault at the worst instant.

Only the framing of ZooKeeper's protocol is read: every message is a 4-byte big-endian
length and a body; after the session handshake, a request body starts with xid and op
type (SetData is 5, its path follows as a length-prefixed string) and a reply body with
the xid it answers. Only plain SetData is matched: a leader's ISR write is one, while the
controller's writes go in a multi (op 14) with its epoch check and pass untouched.
"""
from __future__ import annotations

import socket
import struct
import threading

SET_DATA = 5


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


def set_data_path(frame: bytes) -> tuple[int, str] | None:
    """(xid, path) of a SetData request frame, else None."""
    if len(frame) < 16:
        return None
    xid, op = struct.unpack_from(">ii", frame, 4)
    if op != SET_DATA:
        return None
    (n,) = struct.unpack_from(">i", frame, 12)
    return xid, frame[16:16 + n].decode()


class ZkAnswerDropper:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self._armed: str | None = None
        self._lock = threading.Lock()
        self.dropped = threading.Event()          # set once an answer was lost
        self.dropped_path: str | None = None
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="zk-dropper").start()

    def connect_string(self, chroot: str = "") -> str:
        return f"127.0.0.1:{self.port}{chroot}"

    def arm(self, path_suffix: str) -> None:
        """Lose the reply to the next SetData of a path ending with `path_suffix`."""
        with self._lock:
            self.dropped.clear()
            self._armed = path_suffix

    def close(self) -> None:
        self._closed = True
        for s in [self._listener, *self._socks]:
            try:
                s.close()
            except OSError:
                pass

    # ------------------------------------------------------------ plumbing
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            assert self.target is not None, "set target before clients connect"
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            self._socks += [client, server]
            drop: set[int] = set()
            threading.Thread(target=self._requests, args=(client, server, drop), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, drop), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, drop: set[int]) -> None:
        first = True                              # the session handshake has no xid
        while (frame := _read_frame(client)) is not None:
            if not first:
                got = set_data_path(frame)
                with self._lock:
                    if got is not None and self._armed is not None and got[1].endswith(self._armed):
                        drop.add(got[0])          # before forwarding: the reply cannot win
                        self._armed = None
                        self.dropped_path = got[1]
            first = False
            try:
                server.sendall(frame)
            except OSError:
                break
        _close(client, server)

    def _replies(self, server: socket.socket, client: socket.socket, drop: set[int]) -> None:
        first = True
        while (frame := _read_frame(server)) is not None:
            if not first and len(frame) >= 8 and struct.unpack_from(">i", frame, 4)[0] in drop:
                self.dropped.set()                # the write landed; its client never hears
                break
            first = False
            try:
                client.sendall(frame)
            except OSError:
                break
        _close(client, server)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            s.close()
        except OSError:
            pass
