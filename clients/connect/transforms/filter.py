"""Filter: drop every record it sees; give it a predicate to drop only some (Kafka's Filter)."""
from __future__ import annotations

from ..api import ConnectRecord
from .base import Transformation

__all__ = ["Filter"]


class Filter(Transformation):
    """Drops all records, filtering them from subsequent transformations in the chain. This
    is intended to be used conditionally to filter out records matching (or not matching)
    a particular Predicate."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.Filter"

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None
