#!/usr/bin/env bash
# DELETE /consumers/{group}/instances/{instance}: close the instance (it leaves the group); 204.
# Usage: v2_consumer_delete.sh URL GROUP INSTANCE
set -euo pipefail
curl -s -i -X DELETE -H 'Content-Type: application/vnd.kafka.v2+json' "$1/consumers/$2/instances/$3"
