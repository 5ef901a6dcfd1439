#!/usr/bin/env bash
# POST /consumers/{group}/instances/{instance}/offsets: commit. BODY names the last record
# processed per partition (offset + 1 is committed); without BODY, everything read so far.
# Usage: v2_consumer_commit.sh URL GROUP INSTANCE [BODY]
set -euo pipefail
if [ -n "${4:-}" ]; then
    curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' --data "$4" \
        "$1/consumers/$2/instances/$3/offsets"
else
    curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' \
        "$1/consumers/$2/instances/$3/offsets"
fi
