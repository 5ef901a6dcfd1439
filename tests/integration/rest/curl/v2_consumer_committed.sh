#!/usr/bin/env bash
# GET /consumers/{group}/instances/{instance}/offsets: the committed offsets of the partitions
# in the body (a GET with a body, as Confluent's); {"offsets": [{..., "offset", "metadata"}]}.
# Usage: v2_consumer_committed.sh URL GROUP INSTANCE [BODY]
set -euo pipefail
BODY=${4:-'{"partitions": [{"topic": "test", "partition": 0}]}'}
curl -s -i -X GET -H 'Content-Type: application/vnd.kafka.v2+json' \
    -H 'Accept: application/vnd.kafka.v2+json' --data "$BODY" "$1/consumers/$2/instances/$3/offsets"
