"""What the request handlers may use: the broker's components, typed (Kafka's KafkaApis
receives the same managers). `main` builds one `ApiServices`; the dispatcher hands it to
every handler. Each handler module declares the part it uses as a Protocol of its own, so
mypy holds every handler to that narrow view, and a reader sees at the top of a handler
module everything it can reach.
"""
from __future__ import annotations

from dataclasses import dataclass

from zkcoord.controller import Controller
from zkcoord.store import MetadataStore

from ..config import BrokerConfig
from ..dynamic_configs import DynamicBrokerConfigs
from ..group.coordinator import GroupCoordinator
from ..metadata_cache import MetadataCache
from ..stats import BrokerTopicStats
from ..replication.purgatory import FetchPurgatory
from ..replication.replica_manager import ReplicaManager
from ..replication.throttle import ReplicationThrottle
from ..security.authorizer import Authorizer
from ..security.sasl import SaslServer
from ..topic_admin import TopicAdmin
from ..topic_configs import TopicConfigResolver
from ..txn.coordinator import TransactionCoordinator
from ..txn.producer_ids import ProducerIdManager
from ..txn.verifier import TxnVerifier
from .fetch_sessions import FetchSessionCache


@dataclass
class ApiServices:
    broker_id: int
    listener_name: str              # the inter-broker listener
    cluster_mode: bool
    config: BrokerConfig
    store: MetadataStore              # the cluster's metadata (topics, configs, brokers)
    metadata: MetadataCache         # leaders and live brokers as the controller announced
    replicas: ReplicaManager
    purgatory: FetchPurgatory
    fetch_sessions: FetchSessionCache
    topic_stats: BrokerTopicStats
    topic_admin: TopicAdmin
    topic_configs: TopicConfigResolver
    dynamic_configs: DynamicBrokerConfigs
    groups: GroupCoordinator
    producer_ids: ProducerIdManager
    controller: Controller | None   # cluster mode only
    txn: TransactionCoordinator
    txn_verifier: TxnVerifier
    authorizer: Authorizer          # AllowAll unless authorizer.class.name names Kafka's ACL authorizer
    sasl: SaslServer                # the SASL mechanisms of each SASL listener
    leader_throttle: ReplicationThrottle | None = None   # leader.replication.throttled.rate
