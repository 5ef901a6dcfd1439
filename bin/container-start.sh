#!/usr/bin/env bash
# The entry point of the strom image (bin/build-image.sh installs it as
# /usr/local/bin/strom-container-start). The first argument is the role:
#
#   broker       (the default) a strom broker: standalone, or a cluster member when
#                KAFKA_ZOOKEEPER_CONNECT is set
#   zookeeper    one ZooKeeper server on port 2181 (Debian's jars, for a cluster in containers)
#   anything else is run as a command (e.g. `kafka-topics --bootstrap-server ...`, `bash`)
#
# Broker settings come from the environment as in Kafka's images: KAFKA_<KEY> is the broker
# key <key> in lower case with '_' read as '.', '__' as '_' and '___' as '-'
# (KAFKA_ADVERTISED_LISTENERS -> advertised.listeners, KAFKA_BROKER_ID -> broker.id). They win
# over the defaults below. With STROM_WAIT_FOR_PROPERTIES=FILE the broker waits until FILE
# exists and reads more keys from it, winning over both: StromContainer writes the advertised
# listener there once Docker has mapped the port, which is known only after the start.
#
# ZooKeeper: ZOO_TICK_TIME (ms, default 2000), ZOO_CFG_EXTRA (space-separated key=value
# lines for zoo.cfg), ZK_JVM_OPTS (JVM options; the default starts the JVM fast).
set -euo pipefail

CONF=/etc/strom
DATA=/var/lib/strom

# This container's address on its (first) network: advertised unless told otherwise, since
# 0.0.0.0 cannot be.
own_address() { hostname -i | awk '{print $1}'; }

broker() {
    local -A props=()
    local -a order=()
    set_prop() { [ -n "${props[$1]+x}" ] || order+=("$1"); props[$1]=$2; }

    set_prop listeners "PLAINTEXT://0.0.0.0:9092"
    set_prop advertised.listeners "PLAINTEXT://$(own_address):9092"
    set_prop log.dirs "$DATA/data"
    set_prop group.initial.rebalance.delay.ms 0
    if [ -z "${KAFKA_ZOOKEEPER_CONNECT:-}" ]; then
        # Standalone: the internal topics can only have this broker's replica.
        set_prop offsets.topic.replication.factor 1
        set_prop transaction.state.log.replication.factor 1
        set_prop transaction.state.log.min.isr 1
    fi

    local var key
    while IFS= read -r var; do
        case "$var" in
            KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS) continue ;;
            KAFKA_?*) ;;
            *) continue ;;
        esac
        key="${var#KAFKA_}"
        key="${key,,}"
        key="${key//___/-}"
        key="${key//__/$'\x01'}"
        key="${key//_/.}"
        key="${key//$'\x01'/_}"
        set_prop "$key" "${!var}"
    done < <(compgen -e)

    local late=${STROM_WAIT_FOR_PROPERTIES:-}
    if [ -n "$late" ]; then
        echo "[strom] waiting for $late" >&2
        while [ ! -f "$late" ]; do sleep 0.05; done
        local line
        while IFS= read -r line || [ -n "$line" ]; do
            case "$line" in ''|'#'*) continue ;; esac
            set_prop "${line%%=*}" "${line#*=}"
        done < "$late"
    fi

    mkdir -p "$CONF" "$DATA"
    : > "$CONF/server.properties"
    for key in "${order[@]}"; do
        printf '%s=%s\n' "$key" "${props[$key]}" >> "$CONF/server.properties"
    done
    echo "[strom] $CONF/server.properties:" >&2
    sed 's/^/[strom]   /' "$CONF/server.properties" >&2
    exec python -m broker "$CONF/server.properties"
}

zookeeper() {
    local cfg="$CONF/zoo.cfg" line
    mkdir -p "$CONF" "$DATA/zookeeper"
    {
        echo "tickTime=${ZOO_TICK_TIME:-2000}"
        echo "dataDir=$DATA/zookeeper"
        echo "clientPort=2181"
        echo "maxClientCnxns=0"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=*"
        for line in ${ZOO_CFG_EXTRA:-}; do echo "$line"; done
    } > "$cfg"
    echo "org.slf4j.simpleLogger.showDateTime=true" > "$CONF/simplelogger.properties"
    # shellcheck disable=SC2086  # ZK_JVM_OPTS holds several options
    exec java ${ZK_JVM_OPTS:--Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData} \
        -cp "$CONF:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
}

role=${1:-broker}
case "$role" in
    broker) broker ;;
    zookeeper) zookeeper ;;
    *) exec "$@" ;;
esac
