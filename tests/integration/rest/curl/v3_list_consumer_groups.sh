#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/consumer-groups: the cluster's consumer groups (KafkaConsumerGroupList).
# Usage: v3_list_consumer_groups.sh PROXY_URL CLUSTER_ID
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/consumer-groups"
