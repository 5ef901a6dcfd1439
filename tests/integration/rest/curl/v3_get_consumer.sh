#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}: one member (KafkaConsumer).
# Usage: v3_get_consumer.sh PROXY_URL CLUSTER_ID GROUP CONSUMER_ID
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/consumer-groups/$3/consumers/$4"
