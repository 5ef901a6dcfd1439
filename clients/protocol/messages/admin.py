"""Admin APIs: topics, partitions, configs, records, transactions, ACLs, log dirs, SCRAM.

Declared from Kafka's message specs (clients/src/main/resources/common/message/*.json), up to
the versions Kafka 3.7 speaks. Sub-fields that exist whenever their parent does keep the
default versions="0+": a sub-struct is only encoded in versions where its parent exists.
"""
from ..schema import Api, F, NULL

CreateTopics = Api(
    key=19, name="CreateTopics", valid=(0, 7), flexible=5,
    request=[
        F("topics", [
            F("name", "string"),
            F("num_partitions", "int32", about="-1: manual assignment or broker default"),
            F("replication_factor", "int16", about="-1: manual assignment or broker default"),
            F("assignments", [
                F("partition_index", "int32"),
                F("broker_ids", "[]int32"),
            ]),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", versions="1+"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="2+"),
        F("topics", [
            F("name", "string"),
            F("topic_id", "uuid", versions="7+"),
            F("error_code", "int16"),
            F("error_message", "string", versions="1+", nullable="0+"),
            F("topic_config_error_code", "int16", versions="5+", tag=0),
            F("num_partitions", "int32", versions="5+", default=-1),
            F("replication_factor", "int16", versions="5+", default=-1),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("read_only", "bool"),
                F("config_source", "int8", default=-1),
                F("is_sensitive", "bool"),
            ], versions="5+", nullable="5+"),
        ]),
    ],
)

DeleteTopics = Api(
    key=20, name="DeleteTopics", valid=(0, 6), flexible=4,
    request=[
        F("topics", [
            F("name", "string", nullable="6+", default=NULL),
            F("topic_id", "uuid"),
        ], versions="6+"),
        F("topic_names", "[]string", versions="0-5"),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32", versions="1+"),
        F("responses", [
            F("name", "string", nullable="6+"),
            F("topic_id", "uuid", versions="6+"),
            F("error_code", "int16"),
            F("error_message", "string", versions="5+", nullable="5+", default=NULL),
        ]),
    ],
)

CreatePartitions = Api(
    key=37, name="CreatePartitions", valid=(0, 3), flexible=2,
    request=[
        F("topics", [
            F("name", "string"),
            F("count", "int32"),
            F("assignments", [
                F("broker_ids", "[]int32"),
            ], nullable="0+"),
        ]),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=NULL),
        ]),
    ],
)

DescribeConfigs = Api(
    key=32, name="DescribeConfigs", valid=(0, 4), flexible=4,
    request=[
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", "[]string", nullable="0+", about="null: all keys"),
        ]),
        F("include_synonyms", "bool", versions="1+"),
        F("include_documentation", "bool", versions="3+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("read_only", "bool"),
                F("is_default", "bool", versions="0"),
                # In v0 the source is implied by is_default; -1 is only a placeholder.
                F("config_source", "int8", versions="1+", default=-1),
                F("is_sensitive", "bool"),
                F("synonyms", [
                    F("name", "string"),
                    F("value", "string", nullable="0+"),
                    F("source", "int8"),
                ], versions="1+"),
                F("config_type", "int8", versions="3+"),
                F("documentation", "string", versions="3+", nullable="0+"),
            ]),
        ]),
    ],
)

AlterConfigs = Api(
    key=33, name="AlterConfigs", valid=(0, 2), flexible=2,
    request=[
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [
                F("name", "string"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ]),
    ],
)

IncrementalAlterConfigs = Api(
    key=44, name="IncrementalAlterConfigs", valid=(0, 1), flexible=1,
    request=[
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", [
                F("name", "string"),
                F("config_operation", "int8", about="0 set, 1 delete, 2 append, 3 subtract"),
                F("value", "string", nullable="0+"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ]),
    ],
)

DeleteRecords = Api(
    key=21, name="DeleteRecords", valid=(0, 2), flexible=2,
    request=[
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("offset", "int64"),
            ]),
        ]),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("low_watermark", "int64"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

# ---------------------------------------------------------------- transactions

# Kafka's "commonStructs" of AddPartitionsToTxn: v4 batches several transactions, each
# reusing the per-topic shapes that v0-3 had at top level.
ADD_PARTITIONS_TO_TXN_TOPIC = [
    F("name", "string"),
    F("partitions", "[]int32"),
]
ADD_PARTITIONS_TO_TXN_PARTITION_RESULT = [
    F("partition_index", "int32"),
    F("partition_error_code", "int16"),
]
ADD_PARTITIONS_TO_TXN_TOPIC_RESULT = [
    F("name", "string"),
    F("results_by_partition", ADD_PARTITIONS_TO_TXN_PARTITION_RESULT),
]

AddPartitionsToTxn = Api(
    key=24, name="AddPartitionsToTxn", valid=(0, 5), flexible=3,
    request=[
        # v4+ is sent by brokers (verification; v5 without verify_only adds, for transaction
        # version 2), v0-3 by clients. v5 adds the error TRANSACTION_ABORTABLE.
        F("transactions", [
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("verify_only", "bool"),
            F("topics", ADD_PARTITIONS_TO_TXN_TOPIC),
        ], versions="4+"),
        F("v3_and_below_transactional_id", "string", versions="0-3"),
        F("v3_and_below_producer_id", "int64", versions="0-3"),
        F("v3_and_below_producer_epoch", "int16", versions="0-3"),
        F("v3_and_below_topics", ADD_PARTITIONS_TO_TXN_TOPIC, versions="0-3"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", versions="4+"),
        F("results_by_transaction", [
            F("transactional_id", "string"),
            F("topic_results", ADD_PARTITIONS_TO_TXN_TOPIC_RESULT),
        ], versions="4+"),
        F("results_by_topic_v3_and_below", ADD_PARTITIONS_TO_TXN_TOPIC_RESULT, versions="0-3"),
    ],
)

AddOffsetsToTxn = Api(
    key=25, name="AddOffsetsToTxn", valid=(0, 4), flexible=3,     # v4: TRANSACTION_ABORTABLE
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)

EndTxn = Api(
    # v4: TRANSACTION_ABORTABLE; v5: transaction version 2 (KIP-890 part 2): the epoch is
    # bumped at every end, and the answer names the producer id and epoch to go on with.
    key=26, name="EndTxn", valid=(0, 5), flexible=3,
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool", about="true: commit, false: abort"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", versions="5+", default=-1),
        F("producer_epoch", "int16", versions="5+", default=-1),
    ],
)

WriteTxnMarkers = Api(
    key=27, name="WriteTxnMarkers", valid=(0, 1), flexible=1,
    request=[
        F("markers", [
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("transaction_result", "bool", about="false: abort, true: commit"),
            F("topics", [
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ]),
            F("coordinator_epoch", "int32"),
        ]),
    ],
    response=[
        F("markers", [
            F("producer_id", "int64"),
            F("topics", [
                F("name", "string"),
                F("partitions", [
                    F("partition_index", "int32"),
                    F("error_code", "int16"),
                ]),
            ]),
        ]),
    ],
)

TxnOffsetCommit = Api(
    # v4: TRANSACTION_ABORTABLE; v5 (transaction version 2): also adds the offsets partition
    # to the transaction (no AddOffsetsToTxn).
    key=28, name="TxnOffsetCommit", valid=(0, 5), flexible=3,
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", versions="3+", default=-1),
        F("member_id", "string", versions="3+"),
        F("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", versions="2+", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
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

DescribeProducers = Api(
    key=61, name="DescribeProducers", valid=(0, 0), flexible=0,
    request=[
        F("topics", [
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=NULL),
                F("active_producers", [
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),
                    F("last_sequence", "int32", default=-1),
                    F("last_timestamp", "int64", default=-1),
                    F("coordinator_epoch", "int32"),
                    F("current_txn_start_offset", "int64", default=-1),
                ]),
            ]),
        ]),
    ],
)

DescribeTransactions = Api(
    key=65, name="DescribeTransactions", valid=(0, 0), flexible=0,
    request=[
        F("transactional_ids", "[]string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("transaction_states", [
            F("error_code", "int16"),
            F("transactional_id", "string"),
            F("transaction_state", "string"),
            F("transaction_timeout_ms", "int32"),
            F("transaction_start_time_ms", "int64"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("topics", [
                F("topic", "string"),
                F("partitions", "[]int32"),
            ]),
        ]),
    ],
)

ListTransactions = Api(
    key=66, name="ListTransactions", valid=(0, 1), flexible=0,
    request=[
        F("state_filters", "[]string"),
        F("producer_id_filters", "[]int64"),
        F("duration_filter", "int64", versions="1+", default=-1, about="ms; < 0: no filter"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", "[]string"),
        F("transaction_states", [
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("transaction_state", "string"),
        ]),
    ],
)

# ---------------------------------------------------------------- ACLs

# Kafka's default pattern type is LITERAL (3).
PATTERN_TYPE_LITERAL = 3

CreateAcls = Api(
    key=30, name="CreateAcls", valid=(0, 3), flexible=2,
    request=[
        F("creations", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("resource_pattern_type", "int8", versions="1+", default=PATTERN_TYPE_LITERAL),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)

DescribeAcls = Api(
    key=29, name="DescribeAcls", valid=(0, 3), flexible=2,
    request=[
        F("resource_type_filter", "int8"),
        F("resource_name_filter", "string", nullable="0+"),
        F("pattern_type_filter", "int8", versions="1+", default=PATTERN_TYPE_LITERAL),
        F("principal_filter", "string", nullable="0+"),
        F("host_filter", "string", nullable="0+"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resources", [
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", versions="1+", default=PATTERN_TYPE_LITERAL),
            F("acls", [
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ]),
        ]),
    ],
)

DeleteAcls = Api(
    key=31, name="DeleteAcls", valid=(0, 3), flexible=2,
    request=[
        F("filters", [
            F("resource_type_filter", "int8"),
            F("resource_name_filter", "string", nullable="0+"),
            F("pattern_type_filter", "int8", versions="1+", default=PATTERN_TYPE_LITERAL),
            F("principal_filter", "string", nullable="0+"),
            F("host_filter", "string", nullable="0+"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("filter_results", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("matching_acls", [
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8", versions="1+", default=PATTERN_TYPE_LITERAL),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ]),
        ]),
    ],
)

# ---------------------------------------------------------------- replicas, log dirs, SCRAM

DescribeLogDirs = Api(
    key=35, name="DescribeLogDirs", valid=(0, 4), flexible=2,
    request=[
        F("topics", [
            F("topic", "string"),
            F("partitions", "[]int32"),
        ], nullable="0+", about="null: all topics"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", versions="3+"),
        F("results", [
            F("error_code", "int16"),
            F("log_dir", "string"),
            F("topics", [
                F("name", "string"),
                F("partitions", [
                    F("partition_index", "int32"),
                    F("partition_size", "int64"),
                    F("offset_lag", "int64"),
                    F("is_future_key", "bool"),
                ]),
            ]),
            F("total_bytes", "int64", versions="4+", default=-1),
            F("usable_bytes", "int64", versions="4+", default=-1),
        ]),
    ],
)

ElectLeaders = Api(
    key=43, name="ElectLeaders", valid=(0, 2), flexible=2,
    request=[
        F("election_type", "int8", versions="1+", about="0 preferred, 1 unclean"),
        F("topic_partitions", [
            F("topic", "string"),
            F("partitions", "[]int32"),
        ], nullable="0+", about="null: all partitions"),
        F("timeout_ms", "int32", default=60000),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", versions="1+"),
        F("replica_election_results", [
            F("topic", "string"),
            F("partition_result", [
                F("partition_id", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ]),
        ]),
    ],
)

AlterPartitionReassignments = Api(
    key=45, name="AlterPartitionReassignments", valid=(0, 0), flexible=0,
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("replicas", "[]int32", nullable="0+", default=NULL,
                  about="null: cancel the pending reassignment"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("responses", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ]),
        ]),
    ],
)

ListPartitionReassignments = Api(
    key=46, name="ListPartitionReassignments", valid=(0, 0), flexible=0,
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", [
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ], nullable="0+", default=NULL, about="null: everything"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("topics", [
            F("name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("replicas", "[]int32"),
                F("adding_replicas", "[]int32"),
                F("removing_replicas", "[]int32"),
            ]),
        ]),
    ],
)

# KIP-966: describes topics as Metadata does, a page of partitions at a time (Kafka 3.8+
# clients' describeTopics). ELR fields belong to KRaft's eligible leader replicas.
DESCRIBE_TOPIC_PARTITIONS_CURSOR = (
    F("topic_name", "string"),
    F("partition_index", "int32"),
)

DescribeTopicPartitions = Api(
    key=75, name="DescribeTopicPartitions", valid=(0, 0), flexible=0,
    request=[
        F("topics", [
            F("name", "string"),
        ]),
        F("response_partition_limit", "int32", default=2000),
        F("cursor", DESCRIBE_TOPIC_PARTITIONS_CURSOR, nullable="0+", default=NULL,
          about="null: from the first topic's first partition"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", [
            F("error_code", "int16"),
            F("name", "string", nullable="0+"),
            F("topic_id", "uuid"),
            F("is_internal", "bool"),
            F("partitions", [
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("eligible_leader_replicas", "[]int32", nullable="0+", default=NULL),
                F("last_known_elr", "[]int32", nullable="0+", default=NULL),
                F("offline_replicas", "[]int32"),
            ]),
            F("topic_authorized_operations", "int32", default=-2147483648),
        ]),
        F("next_cursor", DESCRIBE_TOPIC_PARTITIONS_CURSOR, nullable="0+", default=NULL,
          about="null: nothing left"),
    ],
)

DescribeUserScramCredentials = Api(
    key=50, name="DescribeUserScramCredentials", valid=(0, 0), flexible=0,
    request=[
        F("users", [
            F("name", "string"),
        ], nullable="0+", about="null or empty: all users"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("results", [
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("credential_infos", [
                F("mechanism", "int8"),
                F("iterations", "int32"),
            ]),
        ]),
    ],
)

AlterUserScramCredentials = Api(
    key=51, name="AlterUserScramCredentials", valid=(0, 0), flexible=0,
    request=[
        F("deletions", [
            F("name", "string"),
            F("mechanism", "int8"),
        ]),
        F("upsertions", [
            F("name", "string"),
            F("mechanism", "int8"),
            F("iterations", "int32"),
            F("salt", "bytes"),
            F("salted_password", "bytes"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("user", "string"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)

APIS: list[Api] = [
    CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
    IncrementalAlterConfigs, DeleteRecords,
    AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit,
    DescribeProducers, DescribeTransactions, ListTransactions,
    CreateAcls, DescribeAcls, DeleteAcls,
    DescribeLogDirs, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments,
    DescribeTopicPartitions, DescribeUserScramCredentials, AlterUserScramCredentials,
]
