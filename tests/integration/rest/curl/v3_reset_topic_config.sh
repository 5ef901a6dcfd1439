#!/usr/bin/env bash
# DELETE /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}: return one config to its default; 204.
# Usage: v3_reset_topic_config.sh PROXY_URL CLUSTER_ID TOPIC NAME
set -euo pipefail
curl -s -i -X DELETE "$1/v3/clusters/$2/topics/$3/configs/$4"
