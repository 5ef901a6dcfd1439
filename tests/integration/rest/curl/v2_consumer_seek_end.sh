#!/usr/bin/env bash
# POST /consumers/{group}/instances/{instance}/positions/end: seek past the last offsets; 204.
# Usage: v2_consumer_seek_end.sh URL GROUP INSTANCE [BODY]
set -euo pipefail
BODY=${4:-'{"partitions": [{"topic": "test", "partition": 0}]}'}
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' --data "$BODY" \
    "$1/consumers/$2/instances/$3/positions/end"
