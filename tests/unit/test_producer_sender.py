"""The async producer's sender loop against a broker it cannot reach (no sockets: the
client's connection calls are replaced by ones that fail at once)."""
import asyncio

from clients.aio.errors import KafkaConnectionError
from clients.aio.metadata import ClusterMetadata, PartitionInfo, TopicInfo
from clients.aio.producer import AsyncProducer
from clients.types import TopicPartition


def led_by_7(partitions: int) -> ClusterMetadata:
    """Metadata of topic "t" whose partitions broker 7 leads."""
    return ClusterMetadata(topics={"t": TopicInfo("t", {
        i: PartitionInfo("t", i, 7, 0, (7,), (7,)) for i in range(partitions)})})


def test_an_unreachable_leader_is_retried_at_the_backoff_not_in_a_loop():
    # A leader named in metadata whose address is unknown (a dead broker still listed as
    # leader): connecting fails at once, without the pool's reconnect backoff.
    async def main():
        p = AsyncProducer(bootstrap_servers="127.0.0.1:1", enable_idempotence=False,
                          retry_backoff_ms=100, linger_ms=0)
        attempts = 0

        async def connection(node):
            nonlocal attempts
            attempts += 1
            raise KafkaConnectionError(f"no address known for broker {node}")

        p._client.connection = connection
        p._client.pool.connection = lambda node: None
        p._client.metadata.request_update = lambda: None
        p._client.metadata.cluster = led_by_7(1)
        tp = TopicPartition("t", 0)
        assert p._acc.reserve(100)
        p._acc.append(tp, 0, None, b"x", b"\x00", 100, (None, 0, -1, 1, None),
                      asyncio.get_running_loop().time())
        sender = asyncio.get_running_loop().create_task(p._sender_loop())
        await asyncio.sleep(0.5)
        sender.cancel()
        for t in list(p._connecting.values()):
            t.cancel()
        await asyncio.gather(sender, *p._connecting.values(), return_exceptions=True)
        return attempts

    attempts = asyncio.run(main())
    assert 1 <= attempts <= 8, f"{attempts} connection attempts in 0.5 s"


def test_nothing_is_drained_for_a_broker_until_its_connection_is_open():
    # A batch drained while its connection was being opened could reach the new connection
    # ahead of the retry of an earlier batch (the bug behind duplicates after lost answers):
    # batches are drained only for a connection that is open, and written on it in order.
    async def main():
        p = AsyncProducer(bootstrap_servers="127.0.0.1:1", enable_idempotence=False,
                          retry_backoff_ms=50, linger_ms=0)
        loop = asyncio.get_running_loop()
        opened = asyncio.Event()
        written: list[tuple[str, int]] = []

        class OpenConnection:
            closed = False

            def request_nowait(self, api, body, version=None, timeout=None):
                for t in body["topic_data"]:
                    for pd in t["partition_data"]:
                        written.append((t["name"], pd["index"]))
                raise KafkaConnectionError("answers are not needed here")

        conn = OpenConnection()

        async def connection(node):
            await opened.wait()
            return conn

        p._client.connection = connection
        p._client.pool.connection = lambda node: conn if opened.is_set() else None
        p._client.metadata.request_update = lambda: None
        p._client.metadata.cluster = led_by_7(3)
        batches = []
        for partition in range(3):
            assert p._acc.reserve(100)
            b = p._acc.append(TopicPartition("t", partition), 0, None, b"x", b"\x00", 100,
                              (None, 0, -1, 1, None), loop.time())
            batches.append(b)
        sender = loop.create_task(p._sender_loop())
        await asyncio.sleep(0.3)
        drained_while_connecting = [b.attempts for b in batches]
        opened.set()
        await asyncio.sleep(0.2)
        sender.cancel()
        pending = [sender, *p._connecting.values(), *p._requests]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return drained_while_connecting, written

    drained_while_connecting, written = asyncio.run(main())
    assert drained_while_connecting == [0, 0, 0]
    assert sorted(set(written)) == [("t", 0), ("t", 1), ("t", 2)]
