#!/usr/bin/env bash
# POST /consumers/{group}: create a v2 consumer instance; {"instance_id", "base_uri"}.
# Usage: v2_consumer_create.sh URL GROUP [BODY]
set -euo pipefail
BODY=${3:-'{"name": "my_consumer", "format": "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "false"}'}
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' --data "$BODY" "$1/consumers/$2"
