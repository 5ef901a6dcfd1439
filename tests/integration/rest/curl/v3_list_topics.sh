#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/topics: the cluster's topics, internal ones left out (KafkaTopicList).
# Usage: v3_list_topics.sh PROXY_URL CLUSTER_ID
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/topics"
