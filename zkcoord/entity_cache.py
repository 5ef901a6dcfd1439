"""Folding fresh reads of ZooKeeper entities (ACLs, quotas, credentials) into a cache."""
from __future__ import annotations

from typing import Hashable, Iterable, Sized, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Sized)


def merge_reads(cache: dict[K, V], keys: Iterable[K], reads: Iterable[V]) -> list[K]:
    """Store each key's fresh read in `cache` (an empty read removes the key) and return the
    keys whose cached value changed, in order."""
    changed: list[K] = []
    for key, value in zip(keys, reads):
        if key in cache and cache[key] == value:
            continue
        if key not in cache and not value:
            continue
        changed.append(key)
        if value:
            cache[key] = value
        else:
            del cache[key]
    return changed
