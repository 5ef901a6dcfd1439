"""strom's consumer side of fetch sessions (clients/aio/fetch_session.py, sans-io): a full
request first, then only what changed, forgotten partitions named, and a full request again
after anything that leaves the session in doubt."""
from __future__ import annotations

from clients.aio.fetch_session import (FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION,
                                       FetchSessionHandler, next_epoch)
from clients.types import TopicPartition

A, B, C = (TopicPartition("t", p) for p in range(3))


def test_full_then_incremental_with_only_the_changes():
    h = FetchSessionHandler()
    first = h.build({A: (0, 100, 5), B: (7, 100, 5)})
    assert first.full and (first.session_id, first.epoch) == (NO_SESSION, INITIAL_EPOCH)
    assert first.to_send == {A: (0, 100, 5), B: (7, 100, 5)} and first.to_forget == []
    h.on_response(first, session_id=42)
    assert (h.session_id, h.epoch) == (42, 1)

    # A moved on, B unchanged, C new.
    second = h.build({A: (10, 100, 5), B: (7, 100, 5), C: (0, 100, 5)})
    assert not second.full and (second.session_id, second.epoch) == (42, 1)
    assert second.to_send == {A: (10, 100, 5), C: (0, 100, 5)} and second.to_forget == []
    h.on_response(second, session_id=42)
    assert h.epoch == 2

    # B no longer fetched here (paused, buffer full, or moved to another leader); A's
    # leader epoch changed.
    third = h.build({A: (10, 100, 6), C: (0, 100, 5)})
    assert third.to_send == {A: (10, 100, 6)} and third.to_forget == [B]
    h.on_response(third, session_id=42)
    nothing = h.build({A: (10, 100, 6), C: (0, 100, 5)})
    assert nothing.to_send == {} and nothing.to_forget == [] and nothing.epoch == 3
    assert (h.full_requests, h.incremental_requests) == (1, 3)


def test_after_a_doubt_the_next_request_is_full_and_replaces_the_session():
    h = FetchSessionHandler()
    r = h.build({A: (0, 100, -1)})
    h.on_response(r, session_id=42)
    h.build({A: (3, 100, -1)})           # sent, but no answer (connection lost, timeout)
    h.reset()
    again = h.build({A: (3, 100, -1), B: (0, 100, -1)})
    # Epoch 0 with the old id: the broker drops that session and opens a new one.
    assert again.full and (again.session_id, again.epoch) == (42, INITIAL_EPOCH)
    assert again.to_send == {A: (3, 100, -1), B: (0, 100, -1)}
    h.on_response(again, session_id=43)
    assert (h.session_id, h.epoch) == (43, 1)


def test_a_broker_without_room_for_a_session_gets_full_requests():
    h = FetchSessionHandler()
    for _ in range(3):
        r = h.build({A: (0, 100, -1)})
        assert r.full and r.epoch == INITIAL_EPOCH
        h.on_response(r, session_id=NO_SESSION)
    assert h.incremental_requests == 0 and h.partitions == {}


def test_epochs_wrap_to_one():
    assert next_epoch(1) == 2 and next_epoch(2 ** 31 - 1) == 1
    assert FINAL_EPOCH == -1


def test_an_incremental_answer_naming_another_session_starts_over():
    """Kafka's handler: the broker closed our session (it answers with another id, or 0)."""
    h = FetchSessionHandler()
    h.on_response(h.build({A: (0, 100, -1)}), session_id=42)
    r = h.build({A: (4, 100, -1)})
    assert not r.full
    h.on_response(r, session_id=NO_SESSION)
    again = h.build({A: (4, 100, -1)})
    assert again.full and (again.session_id, again.epoch) == (NO_SESSION, INITIAL_EPOCH)
