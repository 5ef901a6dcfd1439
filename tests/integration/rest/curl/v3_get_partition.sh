#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}: one partition (KafkaPartition).
# Usage: v3_get_partition.sh PROXY_URL CLUSTER_ID TOPIC PARTITION
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/topics/$3/partitions/$4"
