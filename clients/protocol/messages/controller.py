"""ZooKeeper-era controller <-> broker APIs: LeaderAndIsr, StopReplica, UpdateMetadata and
ControlledShutdown (removed in Kafka 4.0 together with ZooKeeper mode).

Declared from Kafka's message specs (clients/src/main/resources/common/message/*.json), up to
the versions Kafka 3.7 speaks. Sub-fields that exist whenever their parent does keep the
default versions="0+": a sub-struct is only encoded in versions where its parent exists.

Kafka 3.3+ renamed LeaderAndIsr's partition "ZkVersion" to "PartitionEpoch"; the wire is
unchanged and strom, being a ZooKeeper-mode broker, keeps the name zk_version in both
LeaderAndIsr and UpdateMetadata. The is_k_raft_controller fields (KIP-866, ZK -> KRaft
migration) are only ever false for strom's controller.
"""
from ..schema import Api, F

# LeaderAndIsr request "type" (v5+) and UpdateMetadata "type" (v8+, tagged).
REQUEST_TYPE_UNKNOWN = 0
REQUEST_TYPE_INCREMENTAL = 1
REQUEST_TYPE_FULL = 2

# commonStruct LeaderAndIsrPartitionState: used flat (v0-1) and grouped by topic (v2+).
LEADER_AND_ISR_PARTITION_STATE = [
    F("topic_name", "string", versions="0-1"),
    F("partition_index", "int32"),
    F("controller_epoch", "int32"),
    F("leader", "int32"),
    F("leader_epoch", "int32"),
    F("isr", "[]int32"),
    F("zk_version", "int32", about="Kafka 3.3+ calls it partition_epoch"),
    F("replicas", "[]int32"),
    F("adding_replicas", "[]int32", versions="3+"),
    F("removing_replicas", "[]int32", versions="3+"),
    F("is_new", "bool", versions="1+"),
    F("leader_recovery_state", "int8", versions="6+",
      about="1 while recovering from an unclean leader election"),
]

# commonStruct LeaderAndIsrPartitionError: flat (v0-4) and grouped by topic id (v5+).
LEADER_AND_ISR_PARTITION_ERROR = [
    F("topic_name", "string", versions="0-4"),
    F("partition_index", "int32"),
    F("error_code", "int16"),
]

LeaderAndIsr = Api(
    key=4, name="LeaderAndIsr", valid=(0, 7), flexible=4,
    request=[
        F("controller_id", "int32"),
        F("is_k_raft_controller", "bool", versions="7+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", versions="2+", default=-1),
        F("type", "int8", versions="5+", about="0 unknown, 1 incremental, 2 full"),
        F("ungrouped_partition_states", LEADER_AND_ISR_PARTITION_STATE, versions="0-1"),
        F("topic_states", [
            F("topic_name", "string"),
            F("topic_id", "uuid", versions="5+"),
            F("partition_states", LEADER_AND_ISR_PARTITION_STATE),
        ], versions="2+"),
        F("live_leaders", [
            F("broker_id", "int32"),
            F("host_name", "string"),
            F("port", "int32"),
        ]),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", LEADER_AND_ISR_PARTITION_ERROR, versions="0-4"),
        F("topics", [
            F("topic_id", "uuid"),
            F("partition_errors", LEADER_AND_ISR_PARTITION_ERROR),
        ], versions="5+"),
    ],
)

StopReplica = Api(
    key=5, name="StopReplica", valid=(0, 4), flexible=2,
    request=[
        F("controller_id", "int32"),
        F("is_k_raft_controller", "bool", versions="4+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", versions="1+", default=-1),
        F("delete_partitions", "bool", versions="0-2"),
        F("ungrouped_partitions", [
            F("topic_name", "string"),
            F("partition_index", "int32"),
        ], versions="0"),
        F("topics", [
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ], versions="1-2"),
        # v3+ (KIP-570): per-partition leader epoch and delete flag.
        F("topic_states", [
            F("topic_name", "string"),
            F("partition_states", [
                F("partition_index", "int32"),
                F("leader_epoch", "int32", default=-1),
                F("delete_partition", "bool"),
            ]),
        ], versions="3+"),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", [
            F("topic_name", "string"),
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ],
)

# commonStruct UpdateMetadataPartitionState: flat (v0-4) and grouped by topic (v5+).
UPDATE_METADATA_PARTITION_STATE = [
    F("topic_name", "string", versions="0-4"),
    F("partition_index", "int32"),
    F("controller_epoch", "int32"),
    F("leader", "int32"),
    F("leader_epoch", "int32"),
    F("isr", "[]int32"),
    F("zk_version", "int32"),
    F("replicas", "[]int32"),
    F("offline_replicas", "[]int32", versions="4+"),
]

UpdateMetadata = Api(
    key=6, name="UpdateMetadata", valid=(0, 8), flexible=6,
    request=[
        F("controller_id", "int32"),
        F("is_k_raft_controller", "bool", versions="8+"),
        F("type", "int8", versions="8+", tag=0, tagged_versions="8+",
          about="0 unknown, 1 incremental, 2 full"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", versions="5+", default=-1),
        F("ungrouped_partition_states", UPDATE_METADATA_PARTITION_STATE, versions="0-4"),
        F("topic_states", [
            F("topic_name", "string"),
            F("topic_id", "uuid", versions="7+"),
            F("partition_states", UPDATE_METADATA_PARTITION_STATE),
        ], versions="5+"),
        F("live_brokers", [
            F("id", "int32"),
            # v0 allowed a single host:port per broker, v1+ a list of endpoints.
            F("v0_host", "string", versions="0"),
            F("v0_port", "int32", versions="0"),
            F("endpoints", [
                F("port", "int32"),
                F("host", "string"),
                F("listener", "string", versions="3+"),
                F("security_protocol", "int16"),
            ], versions="1+"),
            F("rack", "string", versions="2+", nullable="0+"),
        ]),
    ],
    response=[
        F("error_code", "int16"),
    ],
)

ControlledShutdown = Api(
    key=7, name="ControlledShutdown", valid=(0, 3), flexible=3,
    request=[
        F("broker_id", "int32"),
        F("broker_epoch", "int64", versions="2+", default=-1),
    ],
    response=[
        F("error_code", "int16"),
        F("remaining_partitions", [
            F("topic_name", "string"),
            F("partition_index", "int32"),
        ]),
    ],
    # v0's request header has no client id.
    request_header_v0=(0,),
)

APIS: list[Api] = [LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown]
