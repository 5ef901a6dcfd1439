#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}: one group (KafkaConsumerGroup).
# Usage: v3_get_consumer_group.sh PROXY_URL CLUSTER_ID GROUP
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/consumer-groups/$3"
