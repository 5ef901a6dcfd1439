#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}: one partition's lag (KafkaConsumerLag).
# Usage: v3_get_lag.sh PROXY_URL CLUSTER_ID GROUP TOPIC PARTITION
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/consumer-groups/$3/lags/$4/partitions/$5"
