#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions: a topic's partitions (KafkaPartitionList).
# Usage: v3_list_partitions.sh PROXY_URL CLUSTER_ID TOPIC
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/topics/$3/partitions"
