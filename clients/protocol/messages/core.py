"""Core data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets, ...

Declared from Kafka's message specs (clients/src/main/resources/common/message/*.json), up to
the versions Kafka 4.0 speaks where strom honours them. Sub-fields that exist whenever their parent does keep the
default versions="0+": a sub-struct is only encoded in versions where its parent exists.
"""
from ..schema import Api, F, NULL

ApiVersions = Api(
    # v4: same layout; a feature whose min version is 0 may be told as 0 (KAFKA-17011: Java
    # clients before 3.9 cannot read a 0 there, so a v3 answer says 1).
    key=18, name="ApiVersions", valid=(0, 4), flexible=3,
    request=[
        F("client_software_name", "string", versions="3+"),
        F("client_software_version", "string", versions="3+"),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", [
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ]),
        F("throttle_time_ms", "int32", versions="1+"),
        F("supported_features", [
            F("name", "string"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ], versions="3+", tag=0),
        F("finalized_features_epoch", "int64", versions="3+", tag=1, default=-1),
        F("finalized_features", [
            F("name", "string"),
            F("max_version_level", "int16"),
            F("min_version_level", "int16"),
        ], versions="3+", tag=2),
        F("zk_migration_ready", "bool", versions="3+", tag=3),
    ],
)

# Kafka's default for "authorized operations" bitfields: INT32_MIN means "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

Metadata = Api(
    # v13: a top-level error code (KIP-1102's REBOOTSTRAP_REQUIRED; 0 from a broker that
    # answers at all).
    key=3, name="Metadata", valid=(0, 13), flexible=9,
    request=[
        # v0: an empty array means all topics; v1+: null means all topics, empty means none.
        F("topics", [
            F("topic_id", "uuid", versions="10+"),
            F("name", "string", nullable="10+"),
        ], nullable="1+"),
        F("allow_auto_topic_creation", "bool", versions="4+", default=True),
        F("include_cluster_authorized_operations", "bool", versions="8-10"),
        F("include_topic_authorized_operations", "bool", versions="8+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="3+"),
        F("brokers", [
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", versions="1+", nullable="1+", default=NULL),
        ]),
        F("cluster_id", "string", versions="2+", nullable="2+", default=NULL),
        F("controller_id", "int32", versions="1+", default=-1),
        F("topics", [
            F("error_code", "int16"),
            F("name", "string", nullable="12+"),
            F("topic_id", "uuid", versions="10+"),
            F("is_internal", "bool", versions="1+"),
            F("partitions", [
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", versions="7+", default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("offline_replicas", "[]int32", versions="5+"),
            ]),
            F("topic_authorized_operations", "int32", versions="8+",
              default=AUTHORIZED_OPERATIONS_OMITTED),
        ]),
        F("cluster_authorized_operations", "int32", versions="8-10",
          default=AUTHORIZED_OPERATIONS_OMITTED),
        F("error_code", "int16", versions="13+"),
    ],
)

Produce = Api(
    # v11: TRANSACTION_ABORTABLE; v12 (transaction version 2): a transactional batch also adds
    # its partition to the transaction (no AddPartitionsToTxn). Same layout as v10.
    key=0, name="Produce", valid=(0, 12), flexible=9,
    request=[
        F("transactional_id", "string", versions="3+", nullable="3+", default=NULL),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F("topic_data", [
            F("name", "string"),
            F("partition_data", [
                F("index", "int32"),
                F("records", "records", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("responses", [
            F("name", "string"),
            F("partition_responses", [
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", versions="2+", default=-1),
                F("log_start_offset", "int64", versions="5+", default=-1),
                F("record_errors", [
                    F("batch_index", "int32"),
                    F("batch_index_error_message", "string", nullable="0+", default=NULL),
                ], versions="8+"),
                F("error_message", "string", versions="8+", nullable="8+", default=NULL),
                F("current_leader", (
                    F("leader_id", "int32", default=-1),
                    F("leader_epoch", "int32", default=-1),
                ), versions="10+", tag=0),
            ]),
        ]),
        F("throttle_time_ms", "int32", versions="1+"),
        F("node_endpoints", [
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+", default=NULL),
        ], versions="10+", tag=0),
    ],
)

Fetch = Api(
    # v17 (KIP-853): a follower may name its log directory; the response is v16's.
    key=1, name="Fetch", valid=(0, 17), flexible=12,
    request=[
        F("cluster_id", "string", versions="12+", nullable="12+", default=NULL, tag=0),
        F("replica_id", "int32", versions="0-14", default=-1),
        F("replica_state", (
            F("replica_id", "int32", default=-1),
            F("replica_epoch", "int64", default=-1),
        ), versions="15+", tag=1),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", versions="3+", default=0x7FFFFFFF),
        F("isolation_level", "int8", versions="4+"),
        F("session_id", "int32", versions="7+"),
        F("session_epoch", "int32", versions="7+", default=-1),
        F("topics", [
            F("topic", "string", versions="0-12"),
            F("topic_id", "uuid", versions="13+"),
            F("partitions", [
                F("partition", "int32"),
                F("current_leader_epoch", "int32", versions="9+", default=-1),
                F("fetch_offset", "int64"),
                F("last_fetched_epoch", "int32", versions="12+", default=-1),
                F("log_start_offset", "int64", versions="5+", default=-1),
                F("partition_max_bytes", "int32"),
                F("replica_directory_id", "uuid", versions="17+", tag=0),
            ]),
        ]),
        F("forgotten_topics_data", [
            F("topic", "string", versions="7-12"),
            F("topic_id", "uuid", versions="13+"),
            F("partitions", "[]int32"),
        ], versions="7+"),
        F("rack_id", "string", versions="11+", default=""),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("error_code", "int16", versions="7+"),
        F("session_id", "int32", versions="7+"),
        F("responses", [
            F("topic", "string", versions="0-12"),
            F("topic_id", "uuid", versions="13+"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("high_watermark", "int64"),
                F("last_stable_offset", "int64", versions="4+", default=-1),
                F("log_start_offset", "int64", versions="5+", default=-1),
                F("diverging_epoch", (
                    F("epoch", "int32", default=-1),
                    F("end_offset", "int64", default=-1),
                ), versions="12+", tag=0),
                F("current_leader", (
                    F("leader_id", "int32", default=-1),
                    F("leader_epoch", "int32", default=-1),
                ), versions="12+", tag=1),
                F("snapshot_id", (
                    F("end_offset", "int64", default=-1),
                    F("epoch", "int32", default=-1),
                ), versions="12+", tag=2),
                F("aborted_transactions", [
                    F("producer_id", "int64"),
                    F("first_offset", "int64"),
                ], versions="4+", nullable="4+"),
                F("preferred_read_replica", "int32", versions="11+", default=-1),
                F("records", "records", nullable="0+"),
            ]),
        ]),
        F("node_endpoints", [
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+", default=NULL),
        ], versions="16+", tag=0),
    ],
)

ListOffsets = Api(
    # v7: -3 max timestamp; v8: -4 earliest local; v9: -5 latest tiered (KIP-1005); v10: a
    # timeout for reads from remote storage (KIP-1075). The responses keep v6's layout.
    key=2, name="ListOffsets", valid=(0, 10), flexible=6,
    request=[
        F("replica_id", "int32"),
        F("isolation_level", "int8", versions="2+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", versions="4+", default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", versions="0", default=1),
            ]),
        ]),
        F("timeout_ms", "int32", versions="10+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="2+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("old_style_offsets", "[]int64", versions="0"),
                F("timestamp", "int64", versions="1+", default=-1),
                F("offset", "int64", versions="1+", default=-1),
                F("leader_epoch", "int32", versions="4+", default=-1),
            ]),
        ]),
    ],
)

OffsetForLeaderEpoch = Api(
    key=23, name="OffsetForLeaderEpoch", valid=(0, 4), flexible=4,
    request=[
        # -2 is the "debug consumer" id, allowed to see offsets beyond the high watermark.
        F("replica_id", "int32", versions="3+", default=-2),
        F("topics", [
            F("topic", "string"),
            F("partitions", [
                F("partition", "int32"),
                F("current_leader_epoch", "int32", versions="2+", default=-1),
                F("leader_epoch", "int32"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="2+"),
        F("topics", [
            F("topic", "string"),
            F("partitions", [
                F("error_code", "int16"),
                F("partition", "int32"),
                F("leader_epoch", "int32", versions="1+", default=-1),
                F("end_offset", "int64"),
            ]),
        ]),
    ],
)

InitProducerId = Api(
    key=22, name="InitProducerId", valid=(0, 5), flexible=2,      # v5: TRANSACTION_ABORTABLE
    request=[
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", versions="3+", default=-1),
        F("producer_epoch", "int16", versions="3+", default=-1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
    ],
)

DescribeCluster = Api(
    key=60, name="DescribeCluster", valid=(0, 2), flexible=0,
    request=[
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", versions="1+", default=1, about="1=brokers, 2=controllers"),
        F("include_fenced_brokers", "bool", versions="2+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=NULL),
        F("endpoint_type", "int8", versions="1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", [
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+", default=NULL),
            F("is_fenced", "bool", versions="2+"),
        ]),
        F("cluster_authorized_operations", "int32", default=AUTHORIZED_OPERATIONS_OMITTED),
    ],
)

APIS: list[Api] = [
    ApiVersions, Metadata, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
    InitProducerId, DescribeCluster,
]
