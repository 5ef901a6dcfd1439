"""Producer id blocks (Kafka's ZkProducerIdManager): a versioned read-modify-write of
/latest_producer_id_block, so concurrent allocators retry and blocks never overlap."""
from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError

from . import zk_paths as zp
from .zk_errors import ZkStoreError
from .zk_paths import ProducerIdBlock
from .zk_session import ZkSession


async def allocate_producer_ids(session: ZkSession, broker_id: int, count: int) -> int:
    """Reserve `count` producer ids for `broker_id`; returns the first."""
    if count <= 0:
        raise ValueError("count must be positive")
    path = zp.LATEST_PRODUCER_ID_BLOCK
    while True:
        got = await session.get(path)
        if got is None:
            try:
                await session.create(path, b"", makepath=True)
            except NodeExistsError:
                pass
            continue
        data, stat = got
        if data:
            block = zp.decode_producer_id_block(data).next_block(broker_id, count)
        else:
            block = ProducerIdBlock(broker_id, 0, count - 1)
        if block.block_end >= 2**63 - 1:
            raise ZkStoreError("all producer ids are exhausted")
        try:
            await session.set(path, zp.encode_producer_id_block(block), stat.version)
            return block.block_start
        except BadVersionError:
            continue
