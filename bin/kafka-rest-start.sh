#!/usr/bin/env bash
# kafka-rest-start: the REST proxy, Confluent's v2 and v3 APIs (python -m clients.rest.main).
#   bin/kafka-rest-start.sh config/kafka-rest.properties [--override key=value ...]
exec "$(dirname "${BASH_SOURCE[0]}")/_run-module.sh" clients.rest.main "$@"
