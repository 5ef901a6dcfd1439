#!/usr/bin/env bash
# POST /consumers/{group}/instances/{instance}/positions: where the next read starts, by
# offset ({"offsets": [...]}) or by time ({"timestamps": [{..., "timestamp": ISO-8601}]}); 204.
# Usage: v2_consumer_seek.sh URL GROUP INSTANCE [BODY]
set -euo pipefail
BODY=${4:-'{"offsets": [{"topic": "test", "partition": 0, "offset": 20}]}'}
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' --data "$BODY" \
    "$1/consumers/$2/instances/$3/positions"
