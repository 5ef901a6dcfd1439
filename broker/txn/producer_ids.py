"""Producer ids handed out in blocks reserved from the metadata store, as Kafka does, so a
restart never reuses an id and the store is written once per block, not per producer."""
from __future__ import annotations

from zkcoord.store import MetadataStore

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._next = 0
        self._end = 0

    async def next_id(self) -> int:
        if self._next >= self._end:
            self._next = await self.store.allocate_producer_ids(BLOCK_SIZE)
            self._end = self._next + BLOCK_SIZE
        pid = self._next
        self._next += 1
        return pid
