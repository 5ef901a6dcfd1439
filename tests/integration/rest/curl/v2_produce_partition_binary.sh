#!/usr/bin/env bash
# Produce base64 records to one partition: v2_produce_partition_binary.sh URL TOPIC PARTITION BODY
set -euo pipefail
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.binary.v2+json' -H 'Accept: application/vnd.kafka.v2+json' --data-binary "$4" "$1/topics/$2/partitions/$3"
