#!/usr/bin/env bash
# POST /consumers/{group}/instances/{instance}/assignments: take these partitions, without
# group management; 204.
# Usage: v2_consumer_assign.sh URL GROUP INSTANCE [BODY]
set -euo pipefail
BODY=${4:-'{"partitions": [{"topic": "test", "partition": 0}, {"topic": "test", "partition": 1}]}'}
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' --data "$BODY" \
    "$1/consumers/$2/instances/$3/assignments"
