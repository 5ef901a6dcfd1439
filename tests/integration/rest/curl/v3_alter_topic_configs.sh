#!/usr/bin/env bash
# POST /v3/clusters/{cluster_id}/topics/{topic_name}/configs:alter: set and reset several configs at once; 204.
# Usage: v3_alter_topic_configs.sh PROXY_URL CLUSTER_ID TOPIC [JSON_BODY]
set -euo pipefail
BODY=${4:-'{"data":[{"name":"retention.ms","value":"86400000"},{"name":"cleanup.policy","operation":"DELETE"}]}'}
curl -s -i -X POST -H 'Content-Type: application/json' --data "$BODY" "$1/v3/clusters/$2/topics/$3/configs:alter"
