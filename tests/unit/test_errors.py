"""The error table: spot checks against Kafka's Errors.java (codes, names, and `retriable`
meaning the Java exception extends RetriableException, as of Kafka 3.7), and the table's
own consistency."""
from __future__ import annotations

import pytest

from clients.protocol import errors
from clients.protocol.errors import BY_CODE, BY_NAME, Code, KafkaError, for_code, raise_for_code


@pytest.mark.parametrize("code,name,retriable", [
    (-1, "UNKNOWN_SERVER_ERROR", False),
    (0, "NONE", False),
    (1, "OFFSET_OUT_OF_RANGE", False),
    (2, "CORRUPT_MESSAGE", True),                  # CorruptRecordException: retriable
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    (6, "NOT_LEADER_OR_FOLLOWER", True),
    (8, "BROKER_NOT_AVAILABLE", False),            # extends ApiException, not retriable
    (9, "REPLICA_NOT_AVAILABLE", True),            # an InvalidMetadataException since 2.x
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
    (16, "NOT_COORDINATOR", True),
    (22, "ILLEGAL_GENERATION", False),
    (25, "UNKNOWN_MEMBER_ID", False),
    (27, "REBALANCE_IN_PROGRESS", False),
    (35, "UNSUPPORTED_VERSION", False),
    (41, "NOT_CONTROLLER", True),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    (51, "CONCURRENT_TRANSACTIONS", True),         # RetriableException since Kafka 3.x
    (56, "KAFKA_STORAGE_ERROR", True),
    (58, "SASL_AUTHENTICATION_FAILED", False),
    (74, "FENCED_LEADER_EPOCH", True),
    (79, "MEMBER_ID_REQUIRED", False),
    (84, "ELECTION_NOT_NEEDED", True),
    (88, "UNSTABLE_OFFSET_COMMIT", True),
    (90, "PRODUCER_FENCED", False),
    (100, "UNKNOWN_TOPIC_ID", True),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True),
    (113, "STALE_MEMBER_EPOCH", False),
    (120, "TRANSACTION_ABORTABLE", False),         # TransactionAbortableException: ApiException
])
def test_spot_checks_against_kafka(code: int, name: str, retriable: bool) -> None:
    cls = for_code(code)
    assert (cls.code, cls.name, cls.retriable) == (code, name, retriable)
    assert BY_NAME[name] is cls
    assert getattr(Code, name) == code


def test_every_code_has_a_distinct_class_with_a_unique_name() -> None:
    codes = [c for c, _, _ in errors._TABLE]
    names = [n for _, n, _ in errors._TABLE]
    assert len(codes) == len(set(codes))
    assert len(names) == len(set(names))
    classes = [BY_CODE[c] for c in codes]
    assert len({id(c) for c in classes}) == len(classes)
    assert len({c.__name__ for c in classes}) == len(classes)
    for code, name, retriable in errors._TABLE:
        cls = BY_CODE[code]
        assert issubclass(cls, KafkaError)
        assert (cls.code, cls.name, cls.retriable) == (code, name, retriable)


def test_codes_are_contiguous_up_to_the_last() -> None:
    codes = sorted(c for c, _, _ in errors._TABLE)
    assert codes == list(range(-1, codes[-1] + 1))


def test_unknown_code_maps_to_base_class() -> None:
    assert for_code(9999) is KafkaError
    assert for_code(-1) is KafkaError


def test_raise_for_code() -> None:
    raise_for_code(0)
    with pytest.raises(for_code(3)) as info:
        raise_for_code(3, "no such topic")
    assert info.value.code == 3 and info.value.retriable
    assert str(info.value) == "no such topic"
    with pytest.raises(KafkaError) as info:
        raise_for_code(25)
    assert str(info.value) == "UNKNOWN_MEMBER_ID"


def test_every_class_is_bound_under_its_own_name() -> None:
    # The module lists its classes by name for type checkers; none may be missing or wrong.
    for code, cls in BY_CODE.items():
        if cls is not KafkaError:
            assert getattr(errors, cls.__name__) is cls, cls.__name__
    assert errors.TopicAlreadyExistsError.code == Code.TOPIC_ALREADY_EXISTS
