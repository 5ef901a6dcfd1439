#!/usr/bin/env bash
# POST /v3/clusters/{cluster_id}/topics: create a topic; 201 with the topic (KafkaTopic) and its URL as Location.
# Usage: v3_create_topic.sh PROXY_URL CLUSTER_ID [JSON_BODY]
set -euo pipefail
BODY=${3:-'{"topic_name":"orders","partitions_count":3,"replication_factor":1,"configs":[{"name":"cleanup.policy","value":"compact"}]}'}
curl -s -i -X POST -H 'Content-Type: application/json' --data "$BODY" "$1/v3/clusters/$2/topics"
