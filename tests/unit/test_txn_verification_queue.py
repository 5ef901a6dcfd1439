"""KIP-890 part 1 in the produce path: a producer's first transactional batch in a partition
waits for the transaction coordinator's answer, and that producer's later batches there
queue behind it, in arrival order. A queued batch asks the coordinator again only if the
transaction is still not open in the partition. Other producers and other partitions do
not wait. The coordinator here is scripted: each question waits until the test answers it."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from broker.security.authorizer import AllowAll
from broker.config import BrokerConfig
from broker.log import LogConfig, LogManager
from broker.metadata_cache import MetadataCache
from broker.replication.purgatory import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from broker.server.dispatch import RequestContext
from broker.server.handlers.produce import produce
from broker.server.network import ConnectionInfo
from broker.stats import BrokerTopicStats
from broker.txn.verifier import TxnVerifier
from clients.protocol.errors import Code
from clients.protocol.headers import decode_request_header
from clients.protocol.messages import API_BY_NAME
from clients.protocol.records import Record, build_batch
from clients.protocol.types import Reader
from tests.support.in_process_broker import request_frame

P, Q = 1000, 2000           # two transactional producers
PRODUCE = API_BY_NAME["Produce"]


class ScriptedCoordinator(TxnVerifier):
    """Records each question (producer id, partitions, answer future) and answers it with
    whatever code the test sets on that future."""

    def __init__(self) -> None:
        super().__init__(0, MetadataCache(), None, local_verify=None)
        self.questions: list[tuple[int, list, asyncio.Future]] = []

    async def verify(self, transactional_id, producer_id, producer_epoch, partitions, add=False):
        tps = list(partitions)
        answer = asyncio.get_running_loop().create_future()
        self.questions.append((producer_id, tps, answer))
        return dict.fromkeys(tps, await answer)

    def unanswered(self) -> list[asyncio.Future]:
        return [a for *_, a in self.questions if not a.done()]


def _leader(tmp_path) -> SimpleNamespace:
    """The produce handler's services: this broker leads t-0 and t-1."""
    logs = LogManager([str(tmp_path / "logs")], LogConfig())
    replicas = ReplicaManager(0, logs, FetchPurgatory(), clock=lambda: 0.0)
    for index in (0, 1):
        replicas.become_leader("t", uuid.uuid4(), index, [0], 1, LogConfig())
    return SimpleNamespace(replicas=replicas, metadata=MetadataCache(), topic_stats=BrokerTopicStats(),
                           authorizer=AllowAll(),
                           config=BrokerConfig.from_dict({"log.dirs": str(tmp_path / "logs")}),
                           txn_verifier=ScriptedCoordinator())


def _txn(pid: int, seq: int) -> bytes:
    return build_batch([Record(None, b"v%d" % seq)], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)


def _send_all(services, batches: dict[int, bytes]) -> asyncio.Future:
    """One Produce request to partitions of t through the real handler; the (error code,
    base offset) of each. Whatever the handler appends at once is appended before this returns."""
    frame = request_frame("Produce", {"transactional_id": "tx", "acks": 1, "timeout_ms": 5000,
                                      "topic_data": [{"name": "t", "partition_data": [
                                          {"index": i, "records": r} for i, r in batches.items()]}]}, 9)
    r = Reader(frame)
    header = decode_request_header(r, PRODUCE.request_header_version(9))
    ctx = RequestContext(header, ConnectionInfo(("127.0.0.1", 1), "PLAINTEXT"), PRODUCE)
    result = produce(services, PRODUCE.decode_request(r, 9), ctx)

    async def outcome():
        response = await result if asyncio.iscoroutine(result) else result
        return [(e["error_code"], e["base_offset"]) for e in response["responses"][0]["partition_responses"]]
    return asyncio.ensure_future(outcome())


def _send(services, partition: int, records: bytes) -> asyncio.Future:
    every = _send_all(services, {partition: records})

    async def only():
        return (await every)[0]
    return asyncio.ensure_future(only())


def _run(test) -> None:
    """A queue that never moves fails the test rather than hanging it."""
    asyncio.run(asyncio.wait_for(test, 5))


async def _settle() -> None:
    """Let every task run until it waits for something the test has not done yet."""
    for _ in range(20):
        await asyncio.sleep(0)


async def _answer_every_question_latest_first(coordinator: ScriptedCoordinator, code: int) -> None:
    """Answer questions as they come, the latest first: an append that did not wait its
    turn would then land before the one it arrived after."""
    while True:
        await _settle()
        open_questions = coordinator.unanswered()
        if not open_questions:
            return
        for answer in reversed(open_questions):
            answer.set_result(code)


def test_appends_queued_behind_a_verification_land_after_it_in_arrival_order(tmp_path):
    async def main():
        services = _leader(tmp_path)
        coordinator = services.txn_verifier
        try:
            sent = [_send(services, 0, _txn(P, seq)) for seq in (0, 1, 2)]
            await _answer_every_question_latest_first(coordinator, 0)
            assert await asyncio.gather(*sent) == [(0, 0), (0, 1), (0, 2)]
            # Once the first batch opened the transaction here the queued ones had nothing to ask.
            assert [(pid, tps) for pid, tps, _ in coordinator.questions] == [(P, [("t", 0)])]
        finally:
            services.replicas.logs.close()
    _run(main())


def test_an_append_waits_behind_a_queued_one_even_once_the_transaction_is_open(tmp_path):
    async def main():
        services = _leader(tmp_path)
        coordinator = services.txn_verifier
        try:
            first = _send(services, 0, _txn(P, 0))
            # t-0's batch queues behind `first`; t-1's, in the same request, needs its own answer.
            both = _send_all(services, {0: _txn(P, 1), 1: _txn(P, 0)})
            await _settle()
            coordinator.questions[0][2].set_result(0)
            await _settle()
            assert await first == (0, 0)            # the transaction is open in t-0 now
            assert coordinator.questions[1][:2] == (P, [("t", 1)])
            last = _send(services, 0, _txn(P, 2))   # must not overtake seq 1, still queued
            coordinator.questions[1][2].set_result(0)
            assert await asyncio.gather(both, last) == [[(0, 1), (0, 0)], (0, 2)]
        finally:
            services.replicas.logs.close()
    _run(main())


def test_after_a_refusal_a_queued_append_asks_again_and_keeps_its_place(tmp_path):
    async def main():
        services = _leader(tmp_path)
        coordinator = services.txn_verifier
        try:
            stale = _send(services, 0, _txn(P, 0))      # delivered after its transaction ended
            retried = _send(services, 0, _txn(P, 0))    # the producer's retry in its new transaction
            follower = _send(services, 0, _txn(P, 1))
            await _settle()
            assert len(coordinator.questions) == 1, "queued appends asked before their turn"
            coordinator.questions[0][2].set_result(Code.INVALID_TXN_STATE)
            await _settle()
            # Still no transaction open in t-0: the retry must ask for itself.
            assert len(coordinator.questions) == 2 and coordinator.questions[1][:2] == (P, [("t", 0)])
            assert not follower.done(), "an append overtook the one queued before it"
            coordinator.questions[1][2].set_result(0)
            assert await asyncio.gather(stale, retried, follower) == [
                (Code.INVALID_TXN_STATE, -1), (0, 0), (0, 1)]
            assert len(coordinator.questions) == 2      # the retry opened it; the follower did not ask
        finally:
            services.replicas.logs.close()
    _run(main())


def test_queued_appends_are_refused_when_the_coordinator_keeps_refusing(tmp_path):
    async def main():
        services = _leader(tmp_path)
        coordinator = services.txn_verifier
        try:
            sent = [_send(services, 0, _txn(P, seq)) for seq in (0, 1)]
            await _answer_every_question_latest_first(coordinator, Code.INVALID_TXN_STATE)
            assert await asyncio.gather(*sent) == [(Code.INVALID_TXN_STATE, -1)] * 2
            assert len(coordinator.questions) == 2
            assert services.replicas.get("t", 0).log.log_end_offset == 0
        finally:
            services.replicas.logs.close()
    _run(main())


def test_other_producers_and_partitions_do_not_wait_behind_a_verification(tmp_path):
    async def main():
        services = _leader(tmp_path)
        coordinator = services.txn_verifier
        try:
            waiting = _send(services, 0, _txn(P, 0))
            other_producer = _send(services, 0, _txn(Q, 0))
            other_partition = _send(services, 1, _txn(P, 0))
            plain = _send(services, 0, build_batch([Record(None, b"plain")]))
            await _settle()
            assert plain.done() and plain.result() == (0, 0)
            assert [(pid, tps) for pid, tps, _ in coordinator.questions] == [
                (P, [("t", 0)]), (Q, [("t", 0)]), (P, [("t", 1)])]
            coordinator.questions[1][2].set_result(0)
            coordinator.questions[2][2].set_result(0)
            assert await asyncio.gather(other_producer, other_partition) == [
                (0, 1), (0, 0)]
            assert not waiting.done()
            coordinator.questions[0][2].set_result(0)
            assert await waiting == (0, 2)
        finally:
            services.replicas.logs.close()
    _run(main())
