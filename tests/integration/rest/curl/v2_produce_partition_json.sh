#!/usr/bin/env bash
# Produce JSON records to one partition: v2_produce_partition_json.sh URL TOPIC PARTITION BODY
set -euo pipefail
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.json.v2+json' -H 'Accept: application/vnd.kafka.v2+json' --data-binary "$4" "$1/topics/$2/partitions/$3"
