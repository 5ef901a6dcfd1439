#!/usr/bin/env bash
# GET /consumers/{group}/instances/{instance}/records: records in the instance's format
# ([{"topic", "key", "value", "partition", "offset"}]); the Accept type must name that format.
# Usage: v2_consumer_records.sh URL GROUP INSTANCE [ACCEPT] [QUERY]
#   ACCEPT: application/vnd.kafka.binary.v2+json (default) or application/vnd.kafka.json.v2+json
set -euo pipefail
ACCEPT=${4:-application/vnd.kafka.binary.v2+json}
QUERY=${5:-timeout=3000&max_bytes=300000}
curl -s -i -H "Accept: $ACCEPT" "$1/consumers/$2/instances/$3/records?$QUERY"
