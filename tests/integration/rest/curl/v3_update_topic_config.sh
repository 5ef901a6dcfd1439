#!/usr/bin/env bash
# PUT /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}: set one config; 204.
# Usage: v3_update_topic_config.sh PROXY_URL CLUSTER_ID TOPIC NAME VALUE
set -euo pipefail
curl -s -i -X PUT -H 'Content-Type: application/json' --data "{\"value\":\"$5\"}" "$1/v3/clusters/$2/topics/$3/configs/$4"
