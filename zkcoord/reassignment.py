"""A partition reassignment's arithmetic (KIP-455, Kafka's ZooKeeper-mode controller), kept
apart from the I/O so it reads, and is tested, on its own.

ORS: the replicas before the move. TRS: the target. While the move runs the assignment is
RS = TRS ++ (ORS - TRS) with adding = TRS - ORS and removing = ORS - TRS; the new replicas
fetch as followers, and once every target replica is in the ISR the controller elects a
leader from TRS if the current one is leaving, drops the removed replicas from the ISR, stops
and deletes them, and makes RS = TRS.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Reassignment:
    original: tuple[int, ...]      # ORS
    target: tuple[int, ...]        # TRS

    @property
    def replicas(self) -> list[int]:
        """RS while moving: the target first (its order is the new preference), then the
        replicas still to remove."""
        return list(self.target) + [r for r in self.original if r not in self.target]

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        return [r for r in self.original if r not in self.target]

    @classmethod
    def from_assignment(cls, replicas: list[int], adding: list[int], removing: list[int]) -> "Reassignment":
        """Back from what the topic znode stores (a new controller resuming a move)."""
        return cls(tuple(r for r in replicas if r not in adding), tuple(r for r in replicas if r not in removing))

    def complete(self, isr: Iterable[int]) -> bool:
        in_sync = set(isr)
        return all(r in in_sync for r in self.target)


def invalid_target(target: list[int], registered: set[int]) -> str | None:
    """Kafka's message when `target` cannot be a replica list, else None."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {target}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {target}"
    unknown = sorted(set(target) - registered)
    if unknown:
        return (f"Replica assignment has brokers that are not alive. Replica list: {target}, "
                f"live broker list: {sorted(registered)}")
    return None
