"""Group coordinator APIs: FindCoordinator, the classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), group listing/description/deletion and committed offsets.

Declared from Kafka's message specs (clients/src/main/resources/common/message/*.json), up to
the versions Kafka 3.7 speaks. Sub-fields that exist whenever their parent does keep the
default versions="0+": a sub-struct is only encoded in versions where its parent exists.
"""
from ..schema import Api, F, NULL

# Kafka's default for "authorized operations" bitfields: INT32_MIN means "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

# FindCoordinator key types.
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

FindCoordinator = Api(
    key=10, name="FindCoordinator", valid=(0, 4), flexible=3,
    request=[
        F("key", "string", versions="0-3"),
        F("key_type", "int8", versions="1+", default=COORDINATOR_GROUP,
          about="0: group, 1: transaction"),
        # v4 batches lookups (KIP-699); the answer is one coordinator per key.
        F("coordinator_keys", "[]string", versions="4+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("error_code", "int16", versions="0-3"),
        F("error_message", "string", versions="1-3", nullable="1-3"),
        F("node_id", "int32", versions="0-3"),
        F("host", "string", versions="0-3"),
        F("port", "int32", versions="0-3"),
        F("coordinators", [
            F("key", "string"),
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="4+"),
        ], versions="4+"),
    ],
)

JoinGroup = Api(
    key=11, name="JoinGroup", valid=(0, 9), flexible=6,
    request=[
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        # Absent before v1: the coordinator then uses the session timeout instead.
        F("rebalance_timeout_ms", "int32", versions="1+", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", versions="5+", nullable="5+", default=NULL),
        F("protocol_type", "string"),
        F("protocols", [
            F("name", "string"),
            F("metadata", "bytes"),
        ]),
        F("reason", "string", versions="8+", nullable="8+", default=NULL),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="2+"),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", versions="7+", nullable="7+", default=NULL),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", versions="9+"),
        F("member_id", "string"),
        F("members", [
            F("member_id", "string"),
            F("group_instance_id", "string", versions="5+", nullable="5+", default=NULL),
            F("metadata", "bytes"),
        ]),
    ],
)

Heartbeat = Api(
    key=12, name="Heartbeat", valid=(0, 4), flexible=4,
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("error_code", "int16"),
    ],
)

LeaveGroup = Api(
    key=13, name="LeaveGroup", valid=(0, 5), flexible=4,
    request=[
        F("group_id", "string"),
        F("member_id", "string", versions="0-2"),
        # v3+ leaves a batch of members, identified by member id and/or static instance id.
        F("members", [
            F("member_id", "string"),
            F("group_instance_id", "string", nullable="3+", default=NULL),
            F("reason", "string", versions="5+", nullable="5+", default=NULL),
        ], versions="3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("error_code", "int16"),
        F("members", [
            F("member_id", "string"),
            F("group_instance_id", "string", nullable="3+"),
            F("error_code", "int16"),
        ], versions="3+"),
    ],
)

SyncGroup = Api(
    key=14, name="SyncGroup", valid=(0, 5), flexible=4,
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
        F("protocol_type", "string", versions="5+", nullable="5+", default=NULL),
        F("protocol_name", "string", versions="5+", nullable="5+", default=NULL),
        F("assignments", [
            F("member_id", "string"),
            F("assignment", "bytes"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("error_code", "int16"),
        F("protocol_type", "string", versions="5+", nullable="5+", default=NULL),
        F("protocol_name", "string", versions="5+", nullable="5+", default=NULL),
        F("assignment", "bytes"),
    ],
)

DescribeGroups = Api(
    # v6 (KIP-1043): an unknown group is GROUP_ID_NOT_FOUND with a message, not a Dead group.
    key=15, name="DescribeGroups", valid=(0, 6), flexible=5,
    request=[
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", versions="3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("groups", [
            F("error_code", "int16"),
            F("error_message", "string", versions="6+", nullable="6+", default=NULL),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            # Only filled in while the group is Stable, as are member metadata/assignment.
            F("protocol_data", "string"),
            F("members", [
                F("member_id", "string"),
                F("group_instance_id", "string", versions="4+", nullable="4+", default=NULL),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            ]),
            F("authorized_operations", "int32", versions="3+",
              default=AUTHORIZED_OPERATIONS_OMITTED),
        ]),
    ],
)

ListGroups = Api(
    # v5 (KIP-848): filter and tell the group type (classic, consumer, share, streams).
    key=16, name="ListGroups", valid=(0, 5), flexible=3,
    request=[
        # Empty: every group, with its state.
        F("states_filter", "[]string", versions="4+"),
        F("types_filter", "[]string", versions="5+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("error_code", "int16"),
        F("groups", [
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", versions="4+"),
            F("group_type", "string", versions="5+"),
        ]),
    ],
)

OffsetCommit = Api(
    key=8, name="OffsetCommit", valid=(0, 9), flexible=8,
    request=[
        F("group_id", "string"),
        # The generation for classic groups; the member epoch for KIP-848 consumer groups.
        F("generation_id_or_member_epoch", "int32", versions="1+", default=-1),
        F("member_id", "string", versions="1+"),
        F("group_instance_id", "string", versions="7+", nullable="7+", default=NULL),
        F("retention_time_ms", "int64", versions="2-4", default=-1),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", versions="6+", default=-1),
                F("commit_timestamp", "int64", versions="1", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="3+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

OffsetFetch = Api(
    key=9, name="OffsetFetch", valid=(0, 9), flexible=6,
    request=[
        F("group_id", "string", versions="0-7"),
        # v2+: null means every topic the group has offsets for.
        F("topics", [
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ], versions="0-7", nullable="2-7"),
        # v8+ fetches for several groups at once (KIP-709).
        F("groups", [
            F("group_id", "string"),
            F("member_id", "string", versions="9+", nullable="9+", default=NULL),
            F("member_epoch", "int32", versions="9+", default=-1),
            F("topics", [
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ], nullable="8+"),
        ], versions="8+"),
        F("require_stable", "bool", versions="7+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="3+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", versions="5-7", default=-1),
                F("metadata", "string", nullable="0-7"),
                F("error_code", "int16"),
            ]),
        ], versions="0-7"),
        F("error_code", "int16", versions="2-7"),
        F("groups", [
            F("group_id", "string"),
            F("topics", [
                F("name", "string"),
                F("partitions", [
                    F("partition_index", "int32"),
                    F("committed_offset", "int64"),
                    F("committed_leader_epoch", "int32", default=-1),
                    F("metadata", "string", nullable="8+"),
                    F("error_code", "int16"),
                ]),
            ]),
            F("error_code", "int16"),
        ], versions="8+"),
    ],
)

DeleteGroups = Api(
    key=42, name="DeleteGroups", valid=(0, 2), flexible=2,
    request=[
        F("groups_names", "[]string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("group_id", "string"),
            F("error_code", "int16"),
        ]),
    ],
)

OffsetDelete = Api(
    key=47, name="OffsetDelete", valid=(0, 0), flexible=None,
    request=[
        F("group_id", "string"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
            ]),
        ]),
    ],
    response=[
        F("error_code", "int16"),
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

APIS: list[Api] = [
    FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups,
    OffsetCommit, OffsetFetch, DeleteGroups, OffsetDelete,
]
