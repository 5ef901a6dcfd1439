"""AdminClient: the blocking face of `clients.aio.admin.AsyncAdminClient`.

Every method runs the async client's coroutine of the same name on the client's own I/O
thread (`clients._loop.LoopThread`) and waits for it, re-raising its exception unchanged: the
error-table classes of `clients.protocol.errors` (message naming the topic/group), or
KafkaTimeoutError / KafkaConnectionError from `clients.aio.errors`. Timeouts are in seconds.

    with AdminClient({"bootstrap.servers": "localhost:9092"}) as admin:
        admin.create_topics([NewTopic("events", 3, 1)])
        print(admin.describe_topics(["events"])["events"].partitions)

Thread-safe: calls from several threads are serialised onto the one event loop. Do not call
it from inside its own callbacks (there are none today) - that would block its I/O thread.
"""
from __future__ import annotations

from typing import Any, Coroutine, Iterable, Literal, Mapping, Sequence, TypeVar

from clients._loop import LoopThread
from clients.aio.acl_types import (AccessControlEntry, AclBinding, AclBindingFilter,
                                   ResourcePattern)
from clients.aio.admin import (AsyncAdminClient, BrokerInfo, ClusterDescription, ConfigEntry,
                               GroupDescription, GroupListing, MemberDescription, OffsetSpec,
                               PartitionDescription, ResourceType, TopicDescription,
                               TransactionDescription)
from clients.aio.log_dir_types import LogDirDescription, TopicPartitionReplica
from clients.aio.reassignment import PartitionReassignment
from clients.aio.scram_types import (ScramCredentialInfo, ScramMechanism,
                                     UserScramCredentialAlteration, UserScramCredentialDeletion,
                                     UserScramCredentialUpsertion)
from clients.protocol.acl import AclOperation, AclPermissionType, PatternType
from clients.protocol.acl import ResourceType as AclResourceType
from clients.protocol.errors import KafkaError
from clients.types import (NewTopic, OffsetAndMetadata, OffsetAndTimestamp, PreparedTransaction,
                           TopicPartition)

__all__ = ["AdminClient", "ClusterDescription", "BrokerInfo", "TopicDescription",
           "PartitionDescription", "ConfigEntry", "GroupListing", "GroupDescription",
           "MemberDescription", "NewTopic", "TransactionDescription",
           "AclBinding", "AclBindingFilter", "ResourcePattern", "AccessControlEntry",
           "AclResourceType", "PatternType", "AclOperation", "AclPermissionType",
           "ScramMechanism", "ScramCredentialInfo", "UserScramCredentialUpsertion",
           "UserScramCredentialDeletion"]

T = TypeVar("T")


class AdminClient:
    """Kafka admin operations, blocking. `AdminClient(config=None, **kwargs)` takes the
    same keys as `AsyncAdminClient`; close() (or `with`) releases the thread and sockets."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        self._thread = LoopThread("strom-admin")
        try:
            self._admin = self._thread.run(_make(config, kwargs))
        except BaseException:
            self._thread.close()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        # No outer timeout: each coroutine is bounded by its own timeout / default.api.timeout.ms.
        return self._thread.run(coro)

    def close(self) -> None:
        self._thread.close(self._admin.close())

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ topics

    def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False,
                      timeout: float = 30.0) -> None:
        self._run(self._admin.create_topics(new_topics, validate_only, timeout))

    def delete_topics(self, names: list[str], timeout: float = 30.0) -> None:
        self._run(self._admin.delete_topics(names, timeout))

    def create_partitions(self, new_counts: Mapping[str, int], validate_only: bool = False,
                          timeout: float = 30.0) -> None:
        self._run(self._admin.create_partitions(new_counts, validate_only, timeout))

    def list_topics(self, include_internal: bool = False) -> list[str]:
        return self._run(self._admin.list_topics(include_internal))

    def describe_cluster(self) -> ClusterDescription:
        return self._run(self._admin.describe_cluster())

    def describe_topics(self, names: list[str] | None = None) -> dict[str, TopicDescription]:
        return self._run(self._admin.describe_topics(names))

    # ------------------------------------------------------------------ configs

    def describe_configs(self, resource_type: ResourceType, name: str,
                         keys: list[str] | None = None) -> dict[str, ConfigEntry]:
        return self._run(self._admin.describe_configs(resource_type, name, keys))

    def alter_configs(self, resource_type: ResourceType, name: str,
                      set: Mapping[str, str] | None = None,
                      delete: Iterable[str] | None = None) -> None:
        self._run(self._admin.alter_configs(resource_type, name, set, delete))

    # ------------------------------------------------------------------ groups

    def list_groups(self) -> list[GroupListing]:
        return self._run(self._admin.list_groups())

    def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]:
        return self._run(self._admin.describe_groups(group_ids))

    def delete_groups(self, group_ids: list[str]) -> None:
        self._run(self._admin.delete_groups(group_ids))

    def list_group_offsets(self, group_id: str, partitions: list[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._run(self._admin.list_group_offsets(group_id, partitions))

    def alter_group_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> None:
        self._run(self._admin.alter_group_offsets(group_id, offsets))

    # ------------------------------------------------------------------ offsets and records

    def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec | str],
                     isolation_level: str = "read_uncommitted"
                     ) -> dict[TopicPartition, OffsetAndTimestamp]:
        return self._run(self._admin.list_offsets(specs, isolation_level))

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._run(self._admin.delete_records(before))

    # ------------------------------------------------------------------ transactions

    def describe_transactions(self, transactional_ids: Iterable[str],
                              timeout: float | None = None) -> dict[str, TransactionDescription]:
        return self._run(self._admin.describe_transactions(list(transactional_ids), timeout))

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool = True,
                             timeout: float | None = None) -> None:
        return self._run(self._admin.complete_transaction(prepared, commit, timeout))

    # ------------------------------------------------------------------ ACLs

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._run(self._admin.create_acls(list(bindings)))

    def describe_acls(self, filter: AclBindingFilter | None = None) -> list[AclBinding]:
        return self._run(self._admin.describe_acls(filter))

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        return self._run(self._admin.delete_acls(list(filters)))

    # ------------------------------------------------------------------ SCRAM credentials

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                        ) -> dict[str, list[ScramCredentialInfo]]:
        return self._run(self._admin.describe_user_scram_credentials(
            None if users is None else list(users)))

    def alter_user_scram_credentials(self,
                                     alterations: Iterable[UserScramCredentialAlteration]) -> None:
        self._run(self._admin.alter_user_scram_credentials(list(alterations)))

    # ------------------------------------------------------------------ leader election

    def elect_leaders(self, election_type: Literal["preferred", "unclean"],
                      partitions: Iterable[TopicPartition] | None = None,
                      timeout: float | None = None) -> dict[TopicPartition, Exception | None]:
        return dict(self._run(self._admin.elect_leaders(
            election_type, None if partitions is None else list(partitions), timeout)))

    # ------------------------------------------------------------------ group offsets deleted

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                                      ) -> dict[TopicPartition, Exception | None]:
        return dict(self._run(self._admin.delete_consumer_group_offsets(group_id, list(partitions))))


    # ------------------------------------------------------------------ client quotas

    def describe_client_quotas(self, components: Iterable[tuple[str, int, str | None]] = (),
                               strict: bool = False
                               ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        return self._run(self._admin.describe_client_quotas(list(components), strict))

    def alter_client_quotas(self, alterations: Iterable[tuple[Mapping[str, str | None],
                                                              Mapping[str, float | None]]],
                            validate_only: bool = False) -> None:
        self._run(self._admin.alter_client_quotas(list(alterations), validate_only))

    # ------------------------------------------------------------------ log dirs

    def describe_log_dirs(self, broker_ids: Iterable[int] | None = None
                          ) -> dict[int, dict[str, LogDirDescription]]:
        return self._run(self._admin.describe_log_dirs(broker_ids))

    def alter_replica_log_dirs(self, moves: Mapping[TopicPartitionReplica, str]
                               ) -> dict[TopicPartitionReplica, KafkaError | None]:
        return self._run(self._admin.alter_replica_log_dirs(moves))

    # ------------------------------------------------------------------ partition reassignment

    def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, Sequence[int] | None],
                                      timeout: float | None = None
                                      ) -> dict[TopicPartition, KafkaError | None]:
        return self._run(self._admin.alter_partition_reassignments(dict(reassignments), timeout))

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                                     timeout: float | None = None
                                     ) -> dict[TopicPartition, PartitionReassignment]:
        return self._run(self._admin.list_partition_reassignments(
            None if partitions is None else list(partitions), timeout))


async def _make(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncAdminClient:
    # Built on the loop thread so every asyncio object belongs to that loop.
    return AsyncAdminClient(config, **kwargs)
