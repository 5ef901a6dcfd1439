"""One table of Kafka error codes: code <-> name <-> retriable <-> exception class.

Every error a handler returns or a client raises comes from here, so the wire code, the
name a user sees and whether to retry are decided in one place (Kafka's Errors.java).
`Code` declares the codes, `_RETRIABLE` the retriable ones; the exception classes are built
from them (`BY_CODE`, `BY_NAME`) and bound under their own names at the end.
"""
from __future__ import annotations


class KafkaError(Exception):
    """Base of all protocol errors; `code` is the wire error code."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = ""):
        super().__init__(message or self.name)
        self.message = message or self.name


class Code:
    """Wire codes by name (Kafka's Errors enum), e.g. `Code.UNKNOWN_TOPIC_OR_PARTITION` -> 3.

    Plain ints, written out (not built from a table) so that a type checker sees each name."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120


# The codes whose Java exception extends RetriableException.
_RETRIABLE = frozenset({
    Code.CORRUPT_MESSAGE, Code.UNKNOWN_TOPIC_OR_PARTITION, Code.LEADER_NOT_AVAILABLE,
    Code.NOT_LEADER_OR_FOLLOWER, Code.REQUEST_TIMED_OUT, Code.REPLICA_NOT_AVAILABLE,
    Code.NETWORK_EXCEPTION, Code.COORDINATOR_LOAD_IN_PROGRESS, Code.COORDINATOR_NOT_AVAILABLE,
    Code.NOT_COORDINATOR, Code.NOT_ENOUGH_REPLICAS, Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    Code.NOT_CONTROLLER, Code.CONCURRENT_TRANSACTIONS, Code.KAFKA_STORAGE_ERROR,
    Code.FETCH_SESSION_ID_NOT_FOUND, Code.INVALID_FETCH_SESSION_EPOCH, Code.LISTENER_NOT_FOUND,
    Code.FENCED_LEADER_EPOCH, Code.UNKNOWN_LEADER_EPOCH, Code.OFFSET_NOT_AVAILABLE,
    Code.PREFERRED_LEADER_NOT_AVAILABLE, Code.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    Code.ELECTION_NOT_NEEDED, Code.UNSTABLE_OFFSET_COMMIT, Code.THROTTLING_QUOTA_EXCEEDED,
    Code.UNKNOWN_TOPIC_ID, Code.INCONSISTENT_TOPIC_ID, Code.FETCH_SESSION_TOPIC_ID_ERROR
})

# (code, NAME, retriable), in code order.
_TABLE: list[tuple[int, str, bool]] = [
    (code, name, code in _RETRIABLE) for name, code in vars(Code).items() if name.isupper()]


def _class_name(name: str) -> str:
    return "".join(p.capitalize() for p in name.lower().split("_")) + "Error"


BY_CODE: dict[int, type[KafkaError]] = {}
BY_NAME: dict[str, type[KafkaError]] = {}
for _code, _name, _retriable in _TABLE:
    _cls = KafkaError if _code == -1 else type(_class_name(_name), (KafkaError,),
                                                {"code": _code, "name": _name, "retriable": _retriable})
    BY_CODE[_code] = _cls
    BY_NAME[_name] = _cls


def for_code(code: int) -> type[KafkaError]:
    """The exception class of a wire code (unknown codes map to the base class)."""
    return BY_CODE.get(code, KafkaError)


def raise_for_code(code: int, message: str = "") -> None:
    if code:
        raise for_code(code)(message)


# Each class under its own name, written out so that `from clients.protocol.errors import
# TopicAlreadyExistsError` is visible to a type checker.
NoneError = BY_NAME["NONE"]
OffsetOutOfRangeError = BY_NAME["OFFSET_OUT_OF_RANGE"]
CorruptMessageError = BY_NAME["CORRUPT_MESSAGE"]
UnknownTopicOrPartitionError = BY_NAME["UNKNOWN_TOPIC_OR_PARTITION"]
InvalidFetchSizeError = BY_NAME["INVALID_FETCH_SIZE"]
LeaderNotAvailableError = BY_NAME["LEADER_NOT_AVAILABLE"]
NotLeaderOrFollowerError = BY_NAME["NOT_LEADER_OR_FOLLOWER"]
RequestTimedOutError = BY_NAME["REQUEST_TIMED_OUT"]
BrokerNotAvailableError = BY_NAME["BROKER_NOT_AVAILABLE"]
ReplicaNotAvailableError = BY_NAME["REPLICA_NOT_AVAILABLE"]
MessageTooLargeError = BY_NAME["MESSAGE_TOO_LARGE"]
StaleControllerEpochError = BY_NAME["STALE_CONTROLLER_EPOCH"]
OffsetMetadataTooLargeError = BY_NAME["OFFSET_METADATA_TOO_LARGE"]
NetworkExceptionError = BY_NAME["NETWORK_EXCEPTION"]
CoordinatorLoadInProgressError = BY_NAME["COORDINATOR_LOAD_IN_PROGRESS"]
CoordinatorNotAvailableError = BY_NAME["COORDINATOR_NOT_AVAILABLE"]
NotCoordinatorError = BY_NAME["NOT_COORDINATOR"]
InvalidTopicExceptionError = BY_NAME["INVALID_TOPIC_EXCEPTION"]
RecordListTooLargeError = BY_NAME["RECORD_LIST_TOO_LARGE"]
NotEnoughReplicasError = BY_NAME["NOT_ENOUGH_REPLICAS"]
NotEnoughReplicasAfterAppendError = BY_NAME["NOT_ENOUGH_REPLICAS_AFTER_APPEND"]
InvalidRequiredAcksError = BY_NAME["INVALID_REQUIRED_ACKS"]
IllegalGenerationError = BY_NAME["ILLEGAL_GENERATION"]
InconsistentGroupProtocolError = BY_NAME["INCONSISTENT_GROUP_PROTOCOL"]
InvalidGroupIdError = BY_NAME["INVALID_GROUP_ID"]
UnknownMemberIdError = BY_NAME["UNKNOWN_MEMBER_ID"]
InvalidSessionTimeoutError = BY_NAME["INVALID_SESSION_TIMEOUT"]
RebalanceInProgressError = BY_NAME["REBALANCE_IN_PROGRESS"]
InvalidCommitOffsetSizeError = BY_NAME["INVALID_COMMIT_OFFSET_SIZE"]
TopicAuthorizationFailedError = BY_NAME["TOPIC_AUTHORIZATION_FAILED"]
GroupAuthorizationFailedError = BY_NAME["GROUP_AUTHORIZATION_FAILED"]
ClusterAuthorizationFailedError = BY_NAME["CLUSTER_AUTHORIZATION_FAILED"]
InvalidTimestampError = BY_NAME["INVALID_TIMESTAMP"]
UnsupportedSaslMechanismError = BY_NAME["UNSUPPORTED_SASL_MECHANISM"]
IllegalSaslStateError = BY_NAME["ILLEGAL_SASL_STATE"]
UnsupportedVersionError = BY_NAME["UNSUPPORTED_VERSION"]
TopicAlreadyExistsError = BY_NAME["TOPIC_ALREADY_EXISTS"]
InvalidPartitionsError = BY_NAME["INVALID_PARTITIONS"]
InvalidReplicationFactorError = BY_NAME["INVALID_REPLICATION_FACTOR"]
InvalidReplicaAssignmentError = BY_NAME["INVALID_REPLICA_ASSIGNMENT"]
InvalidConfigError = BY_NAME["INVALID_CONFIG"]
NotControllerError = BY_NAME["NOT_CONTROLLER"]
InvalidRequestError = BY_NAME["INVALID_REQUEST"]
UnsupportedForMessageFormatError = BY_NAME["UNSUPPORTED_FOR_MESSAGE_FORMAT"]
PolicyViolationError = BY_NAME["POLICY_VIOLATION"]
OutOfOrderSequenceNumberError = BY_NAME["OUT_OF_ORDER_SEQUENCE_NUMBER"]
DuplicateSequenceNumberError = BY_NAME["DUPLICATE_SEQUENCE_NUMBER"]
InvalidProducerEpochError = BY_NAME["INVALID_PRODUCER_EPOCH"]
InvalidTxnStateError = BY_NAME["INVALID_TXN_STATE"]
InvalidProducerIdMappingError = BY_NAME["INVALID_PRODUCER_ID_MAPPING"]
InvalidTransactionTimeoutError = BY_NAME["INVALID_TRANSACTION_TIMEOUT"]
ConcurrentTransactionsError = BY_NAME["CONCURRENT_TRANSACTIONS"]
TransactionCoordinatorFencedError = BY_NAME["TRANSACTION_COORDINATOR_FENCED"]
TransactionalIdAuthorizationFailedError = BY_NAME["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]
SecurityDisabledError = BY_NAME["SECURITY_DISABLED"]
OperationNotAttemptedError = BY_NAME["OPERATION_NOT_ATTEMPTED"]
KafkaStorageErrorError = BY_NAME["KAFKA_STORAGE_ERROR"]
LogDirNotFoundError = BY_NAME["LOG_DIR_NOT_FOUND"]
SaslAuthenticationFailedError = BY_NAME["SASL_AUTHENTICATION_FAILED"]
UnknownProducerIdError = BY_NAME["UNKNOWN_PRODUCER_ID"]
ReassignmentInProgressError = BY_NAME["REASSIGNMENT_IN_PROGRESS"]
DelegationTokenAuthDisabledError = BY_NAME["DELEGATION_TOKEN_AUTH_DISABLED"]
DelegationTokenNotFoundError = BY_NAME["DELEGATION_TOKEN_NOT_FOUND"]
DelegationTokenOwnerMismatchError = BY_NAME["DELEGATION_TOKEN_OWNER_MISMATCH"]
DelegationTokenRequestNotAllowedError = BY_NAME["DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"]
DelegationTokenAuthorizationFailedError = BY_NAME["DELEGATION_TOKEN_AUTHORIZATION_FAILED"]
DelegationTokenExpiredError = BY_NAME["DELEGATION_TOKEN_EXPIRED"]
InvalidPrincipalTypeError = BY_NAME["INVALID_PRINCIPAL_TYPE"]
NonEmptyGroupError = BY_NAME["NON_EMPTY_GROUP"]
GroupIdNotFoundError = BY_NAME["GROUP_ID_NOT_FOUND"]
FetchSessionIdNotFoundError = BY_NAME["FETCH_SESSION_ID_NOT_FOUND"]
InvalidFetchSessionEpochError = BY_NAME["INVALID_FETCH_SESSION_EPOCH"]
ListenerNotFoundError = BY_NAME["LISTENER_NOT_FOUND"]
TopicDeletionDisabledError = BY_NAME["TOPIC_DELETION_DISABLED"]
FencedLeaderEpochError = BY_NAME["FENCED_LEADER_EPOCH"]
UnknownLeaderEpochError = BY_NAME["UNKNOWN_LEADER_EPOCH"]
UnsupportedCompressionTypeError = BY_NAME["UNSUPPORTED_COMPRESSION_TYPE"]
StaleBrokerEpochError = BY_NAME["STALE_BROKER_EPOCH"]
OffsetNotAvailableError = BY_NAME["OFFSET_NOT_AVAILABLE"]
MemberIdRequiredError = BY_NAME["MEMBER_ID_REQUIRED"]
PreferredLeaderNotAvailableError = BY_NAME["PREFERRED_LEADER_NOT_AVAILABLE"]
GroupMaxSizeReachedError = BY_NAME["GROUP_MAX_SIZE_REACHED"]
FencedInstanceIdError = BY_NAME["FENCED_INSTANCE_ID"]
EligibleLeadersNotAvailableError = BY_NAME["ELIGIBLE_LEADERS_NOT_AVAILABLE"]
ElectionNotNeededError = BY_NAME["ELECTION_NOT_NEEDED"]
NoReassignmentInProgressError = BY_NAME["NO_REASSIGNMENT_IN_PROGRESS"]
GroupSubscribedToTopicError = BY_NAME["GROUP_SUBSCRIBED_TO_TOPIC"]
InvalidRecordError = BY_NAME["INVALID_RECORD"]
UnstableOffsetCommitError = BY_NAME["UNSTABLE_OFFSET_COMMIT"]
ThrottlingQuotaExceededError = BY_NAME["THROTTLING_QUOTA_EXCEEDED"]
ProducerFencedError = BY_NAME["PRODUCER_FENCED"]
ResourceNotFoundError = BY_NAME["RESOURCE_NOT_FOUND"]
DuplicateResourceError = BY_NAME["DUPLICATE_RESOURCE"]
UnacceptableCredentialError = BY_NAME["UNACCEPTABLE_CREDENTIAL"]
InconsistentVoterSetError = BY_NAME["INCONSISTENT_VOTER_SET"]
InvalidUpdateVersionError = BY_NAME["INVALID_UPDATE_VERSION"]
FeatureUpdateFailedError = BY_NAME["FEATURE_UPDATE_FAILED"]
PrincipalDeserializationFailureError = BY_NAME["PRINCIPAL_DESERIALIZATION_FAILURE"]
SnapshotNotFoundError = BY_NAME["SNAPSHOT_NOT_FOUND"]
PositionOutOfRangeError = BY_NAME["POSITION_OUT_OF_RANGE"]
UnknownTopicIdError = BY_NAME["UNKNOWN_TOPIC_ID"]
DuplicateBrokerRegistrationError = BY_NAME["DUPLICATE_BROKER_REGISTRATION"]
BrokerIdNotRegisteredError = BY_NAME["BROKER_ID_NOT_REGISTERED"]
InconsistentTopicIdError = BY_NAME["INCONSISTENT_TOPIC_ID"]
InconsistentClusterIdError = BY_NAME["INCONSISTENT_CLUSTER_ID"]
TransactionalIdNotFoundError = BY_NAME["TRANSACTIONAL_ID_NOT_FOUND"]
FetchSessionTopicIdErrorError = BY_NAME["FETCH_SESSION_TOPIC_ID_ERROR"]
IneligibleReplicaError = BY_NAME["INELIGIBLE_REPLICA"]
NewLeaderElectedError = BY_NAME["NEW_LEADER_ELECTED"]
OffsetMovedToTieredStorageError = BY_NAME["OFFSET_MOVED_TO_TIERED_STORAGE"]
FencedMemberEpochError = BY_NAME["FENCED_MEMBER_EPOCH"]
UnreleasedInstanceIdError = BY_NAME["UNRELEASED_INSTANCE_ID"]
UnsupportedAssignorError = BY_NAME["UNSUPPORTED_ASSIGNOR"]
StaleMemberEpochError = BY_NAME["STALE_MEMBER_EPOCH"]
MismatchedEndpointTypeError = BY_NAME["MISMATCHED_ENDPOINT_TYPE"]
UnsupportedEndpointTypeError = BY_NAME["UNSUPPORTED_ENDPOINT_TYPE"]
UnknownControllerIdError = BY_NAME["UNKNOWN_CONTROLLER_ID"]
UnknownSubscriptionIdError = BY_NAME["UNKNOWN_SUBSCRIPTION_ID"]
TelemetryTooLargeError = BY_NAME["TELEMETRY_TOO_LARGE"]
InvalidRegistrationError = BY_NAME["INVALID_REGISTRATION"]
TransactionAbortableError = BY_NAME["TRANSACTION_ABORTABLE"]
