#!/usr/bin/env bash
# Start strom: a cluster of brokers on one ZooKeeper (the default), or one standalone broker.
# First the set-up bin/run-tests.sh does too: as root, apt-get install of what is missing
# (python3 or python3-venv, kcat, Debian's zookeeper package, and openjdk-17-jre-headless
# when there is no java: PySpark's JVM); then .venv with pip install -e '.[test,spark]'
# (about 0.9 GB, most of it pyspark and pyarrow; skipped while pyproject.toml is unchanged).
#
#   bin/start-cluster.sh [--brokers N] [--data-dir DIR] [--timeout SECONDS]
#       The cluster: one ZooKeeper (config/zookeeper.properties, 127.0.0.1:2181) and N brokers
#       (default 3: config/server-0..2.properties on 127.0.0.1:9092..9094, metrics on
#       9404..9406; brokers 3 and up get configs generated into DIR/config/ on the next
#       ports), in the background, output in DIR/logs/. Waits until every broker is
#       registered in /brokers/ids and a controller is elected, then prints the bootstrap
#       servers and how to stop them (bin/stop-cluster.sh). The sample configs give new
#       topics and the internal ones 3 replicas and min.insync.replicas=2; with N < 3 these
#       are lowered to N (and 1 or 2). Starts only what is not running: with some brokers of
#       the cluster (or ZooKeeper) dead it starts those and leaves the others alone. Without
#       --brokers, the cluster is the brokers of its last start (with those added since).
#       Refuses to start onto a port something else holds; when a start fails, stops what it
#       started.
#   bin/start-cluster.sh --standalone [--data-dir DIR]
#       One standalone broker without ZooKeeper (config/server.properties, 127.0.0.1:9092,
#       metrics on 9404) in the foreground; Ctrl-C stops it.
#   bin/start-cluster.sh --secure [--standalone] [...]
#       The same brokers on the same ports, secured (docs/SECURITY.md): one SASL_SSL listener
#       for clients and between brokers (SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; brokers use
#       PLAIN as the user "broker"), Kafka's ACL authorizer with super users admin and broker.
#       In DIR/secure/ (mode 0700; made once, reused by later starts): random passwords, a CA
#       and the brokers' certificate for 127.0.0.1 and localhost (bin/_secure-kit.py, from
#       config/secure/security.properties), the brokers' configs, and the admin's client
#       settings: client.properties (Kafka's keys, for --command-config) and
#       librdkafka.properties (kcat -F). ZooKeeper and the metrics ports stay plaintext on
#       127.0.0.1.
#
#   --rest           also start the REST proxy (docs/REST.md: Confluent's v2 and v3 APIs;
#                    config/kafka-rest.properties, http://127.0.0.1:8082) in front of the
#                    brokers, in the background (output in DIR/logs/rest-rest.out); with
#                    --secure it asks for HTTP basic credentials and passes them to the
#                    brokers as SASL PLAIN, so each user's ACLs apply.
#   --data-dir DIR   where data, pid files (DIR/run/) and logs (DIR/logs/) go; default ./data,
#                    the directories the config files name. Another DIR overrides the
#                    brokers' log.dirs (DIR/kafka-logs-N, standalone: DIR/kafka-logs) and
#                    ZooKeeper's dataDir (DIR/zookeeper).
#   --timeout S      how long to wait for ZooKeeper, registrations and a controller
#                    (default 90, or $STROM_START_TIMEOUT)
#   --no-setup       skip the set-up (no apt-get, no pip)
#   --secure         SASL_SSL and ACLs, as above
#   --dry-run        print what would be done, start nothing (no set-up either)
#
#   Operations on one broker of the cluster (recipes in docs/OPERATIONS.md); each starts
#   ZooKeeper first if it is not running:
#   bin/start-cluster.sh --broker ID        start broker ID if it is not running
#   bin/start-cluster.sh --restart ID       stop broker ID (SIGTERM: controlled shutdown) and
#                                           start it again; waits until it is registered and
#                                           no partition is under-replicated
#   bin/start-cluster.sh --rolling-restart  --restart of every broker, one at a time, the
#                                           controller last; stops at the first one that does
#                                           not come back in sync within --timeout
#   bin/start-cluster.sh --add-broker       one more broker: the next id, its config generated
#                                           into DIR/config/server-ID.properties (port 9092+ID,
#                                           metrics 9404+ID); later starts include it
#   bin/stop-cluster.sh --broker ID         stop one broker
#   A broker's earlier output is kept: DIR/logs/broker-server-ID.out moves to .out.1 (.out.2,
#   up to .out.5) when it starts again.
set -euo pipefail
usage() {   # the comment block at the top of this file
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit "${1:-1}"
}

brokers=3 data_dir="" standalone=0 dry_run=0 setup=1 brokers_given=0 secure=0 rest=0
action=start target=""   # start | broker | restart | rolling | add; target: a broker id
timeout=${STROM_START_TIMEOUT:-90}
while [ $# -gt 0 ]; do
    case "$1" in
        --brokers) [ $# -ge 2 ] || usage; brokers=$2; brokers_given=1; shift 2 ;;
        --brokers=*) brokers=${1#*=}; brokers_given=1; shift ;;
        --data-dir) [ $# -ge 2 ] || usage; data_dir=$2; shift 2 ;;
        --data-dir=*) data_dir=${1#*=}; shift ;;
        --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
        --timeout=*) timeout=${1#*=}; shift ;;
        --standalone) standalone=1; shift ;;
        --secure) secure=1; shift ;;
        --rest) rest=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        --broker) [ $# -ge 2 ] || usage; action=broker; target=$2; shift 2 ;;
        --restart) [ $# -ge 2 ] || usage; action=restart; target=$2; shift 2 ;;
        --rolling-restart) action=rolling; shift ;;
        --add-broker) action=add; shift ;;
        --no-setup) setup=0; shift ;;
        -h | --help) usage 0 ;;
        *) echo "$0: unknown argument: $1" >&2; usage ;;
    esac
done
[[ "$brokers" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --brokers wants a positive number, not '$brokers'" >&2; exit 1; }
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --timeout wants seconds, not '$timeout'" >&2; exit 1; }
[ -z "$target" ] || [[ "$target" =~ ^[0-9]+$ ]] || { echo "$0: a broker id is a number, not '$target'" >&2; exit 1; }
if [ "$action" != start ] && [ "$standalone" = 1 ]; then
    echo "$0: --broker, --restart, --rolling-restart and --add-broker are for the cluster, not --standalone" >&2
    exit 1
fi
# --data-dir is relative to where the script was called from, not to the repository
[ -z "$data_dir" ] || data_dir="$(realpath -m -- "$data_dir")"

cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

default_dir="$STROM_ROOT/data"
[ -n "$data_dir" ] || data_dir="$default_dir"
custom_dir=0
[ "$data_dir" = "$default_dir" ] || custom_dir=1
run_dir="$data_dir/run"
log_dir="$data_dir/logs"
stop_hint="bin/stop-cluster.sh"
[ "$custom_dir" = 0 ] || stop_hint="bin/stop-cluster.sh --data-dir $data_dir"
secure_dir="$data_dir/secure"

show() { echo "+ $*"; }   # --dry-run: what would run

# A property's last value in a .properties file (simple KEY=VALUE lines, as ours are).
prop() {
    sed -n "s/^[[:space:]]*${2//./\\.}[[:space:]]*[=:][[:space:]]*//p" "$1" | tail -n 1 | sed 's/[[:space:]]*$//'
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A four-letter-word command to ZooKeeper on 127.0.0.1:PORT; prints the answer.
zk_word() {
    ( exec 3<>"/dev/tcp/127.0.0.1/$1" && printf '%s' "$2" >&3 && timeout 2 cat <&3 ) 2>/dev/null || true
}

# The pid recorded in a pid file if that process runs, is what the file says, and is no zombie.
alive() {
    local pid
    pid="$(strom_pid_of "$1")" || return 1
    ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

############################# --secure #############################

# DIR/secure's passwords, certificates and client configs: made when missing, else reused.
secure_kit() {   # BOOTSTRAP
    if [ "$dry_run" = 1 ] && [ ! -x "$STROM_VENV/bin/python" ]; then
        show "$STROM_VENV/bin/python bin/_secure-kit.py $secure_dir --bootstrap $1"
        return 0
    fi
    "$STROM_VENV/bin/python" bin/_secure-kit.py "$secure_dir" --bootstrap "$1" \
        $([ "$dry_run" = 0 ] || echo --dry-run)
}

# A broker config secured: SRC with its listener made SASL_SSL on the same port, followed by
# DIR/secure/broker-security.properties. Mode 0600: it holds the brokers' passwords.
write_secure_config() {   # SRC PORT OUT
    local src=$1 port=$2 out=$3
    if [ "$dry_run" = 1 ]; then
        show "generate $out from $src (listeners=SASL_SSL://127.0.0.1:$port) and $secure_dir/broker-security.properties"
        return 0
    fi
    (
        umask 077
        {
            echo "# Generated by bin/start-cluster.sh --secure from $src and config/secure/security.properties."
            sed -e "s#^listeners=.*#listeners=SASL_SSL://127.0.0.1:$port#" \
                -e "s#^\#advertised\.listeners=PLAINTEXT://#\#advertised.listeners=SASL_SSL://#" "$src"
            echo
            cat "$secure_dir/broker-security.properties"
        } > "$out.tmp"
        mv -f "$out.tmp" "$out"
    )
}

# How to reach the secured cluster, printed once it is up.
secure_hint() {   # BOOTSTRAP
    echo "security: SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with ACLs; the admin user (a super user):"
    echo "  bin/kafka-topics.sh --bootstrap-server $1 --command-config $secure_dir/client.properties --list"
    echo "  kcat -b $1 -F $secure_dir/librdkafka.properties -L"
}

if [ "$secure" = 0 ] && [ -d "$secure_dir" ]; then
    say "note: $secure_dir exists but this start is not secured (PLAINTEXT, no ACLs); add --secure for SASL_SSL"
fi

if [ "$setup" = 1 ] && [ "$dry_run" = 0 ]; then
    strom_setup
fi
if [ ! -f broker/__main__.py ]; then
    say "broker/__main__.py is missing: this tree has no runnable broker yet"
    exit 1
fi

############################# --rest #############################

# Run a bin/ start script in the foreground mode under nohup, in the background: it execs the
# server, so $! is the server's pid. Waits (up to 5 s) until that exec happened. The script
# itself records the pid in data/run/ too; with another data dir that copy is removed, so
# that only DIR/run/ has it.
launch() {
    local kind=$1 name=$2 pidfile log pid i
    shift 2
    pidfile="$run_dir/$kind-$name.pid"
    log="$log_dir/$kind-$name.out"
    strom_keep_log "$log"
    nohup "$@" > "$log" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$pidfile"
    started+=("$pidfile")
    say "started $kind $name in the background (pid $pid); output in $log"
    for ((i = 0; i < 100; i++)); do
        alive "$pidfile" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if [ "$custom_dir" = 1 ] && [ "$(cat "data/run/$kind-$name.pid" 2>/dev/null)" = "$pid" ]; then
        rm -f "data/run/$kind-$name.pid"
    fi
}

# Print the last lines of the output of every started process that is gone.
report_dead() {
    local file
    for file in "${started[@]}"; do
        alive "$file" && continue
        say "$(basename "$file" .pid) exited; the end of $log_dir/$(basename "$file" .pid).out:"
        tail -n 30 "$log_dir/$(basename "$file" .pid).out" >&2 || true
    done
}


# The REST proxy in front of BOOTSTRAP, in the background; waits until it listens.
start_rest() {   # BOOTSTRAP
    local args=(config/kafka-rest.properties --override "bootstrap.servers=$1"
                --ready-file "$run_dir/rest.url") key value i
    if [ "$secure" = 1 ]; then
        # The proxy reaches the brokers as the brokers' clients do (SASL_SSL, our CA), but
        # as the HTTP user: no identity of its own, so no sasl.jaas.config.
        args+=(--override authentication.method=BASIC
               --override client.security.protocol=SASL_SSL
               --override client.ssl.truststore.type=PEM
               --override "client.ssl.truststore.location=$secure_dir/ca.pem")
    fi
    if [ "$dry_run" = 1 ]; then
        show "bin/kafka-rest-start.sh ${args[*]}   # background, pid -> $run_dir/rest-rest.pid"
        return 0
    fi
    if alive "$run_dir/rest-rest.pid"; then
        say "the REST proxy is already running (pid $(cat "$run_dir/rest-rest.pid"))"
        return 1
    fi
    rm -f "$run_dir/rest.url"
    mkdir -p "$run_dir" "$log_dir"
    launch rest rest bin/kafka-rest-start.sh "${args[@]}"
    for ((i = 0; i < 300; i++)); do
        [ -s "$run_dir/rest.url" ] && break
        if ! alive "$run_dir/rest-rest.pid"; then
            report_dead
            return 1
        fi
        sleep 0.1
    done
    [ -s "$run_dir/rest.url" ] || { say "the REST proxy does not listen after 30s"; return 1; }
    echo "REST proxy: $(cat "$run_dir/rest.url")"
}

############################# standalone #############################

start_standalone() {
    local config=config/server.properties pidfile="$run_dir/broker-server.pid" pid port
    port="$(prop config/server.properties listeners | sed 's/.*://')"
    [ "$secure" = 0 ] || config="$secure_dir/server.properties"
    local args=("$config")
    [ "$custom_dir" = 0 ] || args+=(--override "log.dirs=$data_dir/kafka-logs")
    [ "$brokers_given" = 0 ] || say "--brokers $brokers is ignored by the standalone broker"
    if [ "$dry_run" = 1 ]; then
        if [ "$secure" = 1 ]; then
            secure_kit "127.0.0.1:$port"
            write_secure_config config/server.properties "$port" "$config"
        fi
        [ "$rest" = 0 ] || start_rest "127.0.0.1:$port"
        show "exec bin/kafka-server-start.sh ${args[*]}   # foreground, pid -> $pidfile"
        exit 0
    fi
    if pid="$(strom_pid_of "$pidfile")"; then
        say "the standalone broker is already running (pid $pid, $pidfile)"
        exit 1
    fi
    if [ "$secure" = 1 ]; then
        secure_kit "127.0.0.1:$port"
        write_secure_config config/server.properties "$port" "$config"
        secure_hint "127.0.0.1:$port" >&2
    fi
    mkdir -p "$run_dir"
    if [ "$rest" = 1 ]; then
        started=()
        start_rest "127.0.0.1:$port" || exit 1
        say "the REST proxy stays up after the broker stops; bin/stop-cluster.sh stops it"
    fi
    echo $$ > "$pidfile"   # exec keeps the pid: this becomes the broker's
    say "starting the standalone broker on 127.0.0.1:$port in the foreground; Ctrl-C stops it"
    exec bin/kafka-server-start.sh "${args[@]}"
}

if [ "$standalone" = 1 ]; then
    start_standalone
fi

############################# cluster #############################

# ZooKeeper's config: ours, or a copy with dataDir in DIR.
zk_config=config/zookeeper.properties
if [ "$custom_dir" = 1 ]; then
    zk_config="$data_dir/config/zookeeper.properties"
fi
zk_port="$(prop config/zookeeper.properties clientPort)"

# Broker i's config and the --override arguments it gets.
broker_config() {
    local i=$1
    if [ -f "config/server-$i.properties" ] && [ "$i" -le 2 ]; then
        echo "config/server-$i.properties"
    else
        echo "$data_dir/config/server-$i.properties"
    fi
}
# The config broker i starts with: broker_config's, or its secured copy in DIR/secure/.
launch_config() {
    local i=$1
    if [ "$secure" = 1 ]; then
        echo "$secure_dir/$(basename "$(broker_config "$i")")"
    else
        broker_config "$i"
    fi
}
broker_port() {
    local i=$1
    if [ -f "config/server-$i.properties" ] && [ "$i" -le 2 ]; then
        prop "config/server-$i.properties" listeners | sed 's/.*://'
    else
        echo $((9092 + i))
    fi
}
broker_metrics_port() {   # empty when the config leaves metrics off
    local i=$1 port
    if [ -f "config/server-$i.properties" ] && [ "$i" -le 2 ]; then
        port="$(prop "config/server-$i.properties" metrics.port)"
        [ "${port:--1}" = "-1" ] || echo "$port"
    else
        echo $((9404 + i))
    fi
}
broker_overrides() {   # one word per line
    local i=$1 n=$brokers
    [ "$custom_dir" = 0 ] || printf '%s\n' --override "log.dirs=$data_dir/kafka-logs-$i"
    if [ "$n" -lt 3 ]; then   # topics cannot have more replicas than brokers
        printf '%s\n' --override "default.replication.factor=$n" \
            --override "min.insync.replicas=$((n < 2 ? n : 2))" \
            --override "offsets.topic.replication.factor=$n" \
            --override "transaction.state.log.replication.factor=$n" \
            --override "transaction.state.log.min.isr=$((n < 2 ? n : 2))"
    fi
}
broker_name() { basename "$(launch_config "$1")" .properties; }   # of its pid and .out files
broker_pidfile() { echo "$run_dir/broker-$(broker_name "$1").pid"; }

# The cluster's broker ids: 0..N-1 with --brokers N; else those of its last start, which
# --add-broker extends; else 0 1 2.
ids_file="$run_dir/cluster-brokers"
ids=()
if [ "$brokers_given" = 1 ]; then
    for ((i = 0; i < brokers; i++)); do ids+=("$i"); done
elif [ -s "$ids_file" ]; then
    read -r -a ids < "$ids_file"
else
    ids=(0 1 2)
fi
if [ "$action" = add ]; then
    target=0
    for i in "${ids[@]}"; do [ "$i" -lt "$target" ] || target=$((i + 1)); done
    ids+=("$target")
fi
brokers=${#ids[@]}
if [ -n "$target" ] && [[ " ${ids[*]} " != *" $target "* ]]; then
    say "broker $target is not one of this cluster's brokers (${ids[*]}); add one with --add-broker"
    exit 1
fi

generate_configs() {
    local i port logs
    if [ "$secure" = 1 ]; then
        secure_kit "$bootstrap"
    fi
    mkdir -p "$data_dir/config"
    if [ "$custom_dir" = 1 ]; then
        sed "s#^dataDir=.*#dataDir=$data_dir/zookeeper#" config/zookeeper.properties > "$zk_config"
    fi
    for i in "${ids[@]}"; do
        [ "$(broker_config "$i")" != "config/server-$i.properties" ] || continue
        port="$(broker_port "$i")"
        logs="./data/kafka-logs-$i"
        [ "$custom_dir" = 0 ] || logs="$data_dir/kafka-logs-$i"
        sed -e "1s#.*#\# strom broker configuration: broker $i, generated by bin/start-cluster.sh from config/server-2.properties#" \
            -e "s/^broker\.id=.*/broker.id=$i/" \
            -e "s#^listeners=.*#listeners=PLAINTEXT://127.0.0.1:$port#" \
            -e "s#your\.host\.name:[0-9]*#your.host.name:$port#" \
            -e "s#^log\.dirs=.*#log.dirs=$logs#" \
            -e "s/^metrics\.port=.*/metrics.port=$((9404 + i))/" \
            -e "s/^#broker\.rack=.*/#broker.rack=rack-$i/" \
            config/server-2.properties > "$(broker_config "$i")"
    done
    if [ "$secure" = 1 ]; then
        for i in "${ids[@]}"; do
            write_secure_config "$(broker_config "$i")" "$(broker_port "$i")" "$(launch_config "$i")"
        done
    fi
}

bootstrap=""
for i in "${ids[@]}"; do
    bootstrap="${bootstrap:+$bootstrap,}127.0.0.1:$(broker_port "$i")"
done
zk_connect="$(prop config/server-0.properties zookeeper.connect)"

# What this run works on: the brokers to start (or restart), in order.
case "$action" in
    start) targets=("${ids[@]}") ;;
    broker | restart | add) targets=("$target") ;;
    rolling) targets=("${ids[@]}") ;;
esac

if [ "$dry_run" = 1 ]; then
    [ "$custom_dir" = 0 ] || show "generate $zk_config (dataDir=$data_dir/zookeeper)"
    for i in "${ids[@]}"; do
        [ "$(broker_config "$i")" = "config/server-$i.properties" ] ||
            show "generate $(broker_config "$i") from config/server-2.properties (port $(broker_port "$i"))"
    done
    if [ "$secure" = 1 ]; then
        secure_kit "$bootstrap"
        for i in "${ids[@]}"; do
            write_secure_config "$(broker_config "$i")" "$(broker_port "$i")" "$(launch_config "$i")"
        done
    fi
    show "unless it runs: nohup bin/zookeeper-server-start.sh $zk_config > $log_dir/zookeeper-zookeeper.out &   # pid -> $run_dir/zookeeper-zookeeper.pid"
    show "wait until ZooKeeper on 127.0.0.1:$zk_port serves (ruok/srvr)"
    for i in "${targets[@]}"; do
        cfg="$(launch_config "$i")"
        mapfile -t overrides < <(broker_overrides "$i")
        case "$action" in
            restart | rolling) show "stop broker $i if it runs (SIGTERM), then:" ;;
            *) show "unless broker $i runs:" ;;
        esac
        show "nohup bin/kafka-server-start.sh $cfg" "${overrides[@]}" \
            "> $log_dir/broker-$(broker_name "$i").out &   # pid -> $(broker_pidfile "$i")"
        case "$action" in
            restart | rolling) show "wait until broker $i is registered and no partition is under-replicated" ;;
        esac
    done
    show "wait until brokers ${targets[*]} are in $zk_connect /brokers/ids and /controller exists"
    [ "$rest" = 0 ] || start_rest "$bootstrap"
    echo "bootstrap servers: $bootstrap"
    [ "$secure" = 0 ] || secure_hint "$bootstrap"
    echo "stop with: $stop_hint"
    exit 0
fi

mkdir -p "$run_dir" "$log_dir"
zk_running=0
if alive "$run_dir/zookeeper-zookeeper.pid"; then
    zk_running=1
else
    rm -f "$run_dir/zookeeper-zookeeper.pid"
fi
# Brokers already running are left alone (a start) or restarted (--restart, --rolling-restart).
to_start=()
for i in "${targets[@]}"; do
    if pid="$(strom_pid_of "$(broker_pidfile "$i")")"; then
        case "$action" in
            restart | rolling) to_start+=("$i") ;;
            *) say "broker $i is already running (pid $pid, $(broker_pidfile "$i"))" ;;
        esac
    else
        rm -f "$(broker_pidfile "$i")"
        to_start+=("$i")
    fi
done
for file in "$run_dir"/rest-*.pid; do
    [ -e "$file" ] && ! alive "$file" && rm -f "$file"
done
if [ ${#to_start[@]} -eq 0 ] && [ "$zk_running" = 1 ] && { [ "$rest" = 0 ] || alive "$run_dir/rest-rest.pid"; }; then
    say "the cluster is already running: nothing to start"
    echo "bootstrap servers: $bootstrap"
    echo "stop with: $stop_hint"
    exit 0
fi

# Refuse to start onto ports something else holds (a broker to restart still holds its own).
ports=()
[ "$zk_running" = 1 ] || ports+=("$zk_port")
for i in "${to_start[@]}"; do
    strom_pid_of "$(broker_pidfile "$i")" >/dev/null && continue
    ports+=("$(broker_port "$i")" $(broker_metrics_port "$i"))
done
for port in "${ports[@]}"; do
    if port_in_use "$port"; then
        say "127.0.0.1:$port is already in use (another cluster, or bin/start-cluster.sh --standalone?)"
        exit 1
    fi
done

generate_configs
printf '%s\n' "${ids[*]}" > "$ids_file"

started=()   # pid files of what this run started
ok=0
on_exit() {
    local kind file pid pids
    [ "$ok" = 1 ] && return 0
    for kind in rest broker zookeeper; do   # brokers before ZooKeeper, so that they can still deregister
        pids=()
        for file in "${started[@]}"; do
            [[ "$(basename "$file")" == "$kind"-* ]] || continue
            pid="$(strom_pid_of "$file")" && pids+=("$pid")
            rm -f "$file"
        done
        if [ ${#pids[@]} -gt 0 ]; then
            say "start failed: stopping $kind pid(s) ${pids[*]} (logs in $log_dir/)"
            STROM_STOP_TIMEOUT=10 strom_stop "${pids[@]}"
        fi
    done
}
trap on_exit EXIT
trap 'exit 130' INT TERM

deadline=$((SECONDS + timeout))
if [ "$zk_running" = 0 ]; then
    launch zookeeper zookeeper bin/zookeeper-server-start.sh "$zk_config"
fi
until zk_word "$zk_port" srvr | grep -q '^Mode:'; do
    if ! alive "$run_dir/zookeeper-zookeeper.pid"; then
        report_dead
        exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        say "ZooKeeper does not serve on 127.0.0.1:$zk_port after ${timeout}s"
        exit 1
    fi
    sleep 0.2
done
say "ZooKeeper serves on 127.0.0.1:$zk_port"

now_ms() { date +%s%3N; }
start_broker() {   # ID
    local cfg
    cfg="$(launch_config "$1")"
    mapfile -t overrides < <(broker_overrides "$1")
    launch broker "$(broker_name "$1")" bin/kafka-server-start.sh "$cfg" "${overrides[@]}"
}

# Wait until brokers IDS... are registered and a controller is elected.
wait_registered() {   # SINCE_MS IDS...
    local since=$1 pids=() i
    shift
    for i in "$@"; do pids+=("$(cat "$(broker_pidfile "$i")")"); done
    say "waiting until brokers $* are registered in ZooKeeper ($zk_connect) and a controller is elected"
    if ! "$STROM_VENV/bin/python" bin/_cluster-wait.py registered "$zk_connect" "$((deadline - SECONDS))" \
        "$(IFS=,; echo "$*")" "$(IFS=,; echo "${pids[*]}")" "$since"; then
        report_dead
        exit 1
    fi
}

# Stop broker ID if it runs (controlled shutdown), start it, wait until it is back in sync.
restart_broker() {   # ID
    local pidfile pid since
    pidfile="$(broker_pidfile "$1")"
    if pid="$(strom_pid_of "$pidfile")"; then
        say "stopping broker $1 (pid $pid): controlled shutdown"
        strom_stop "$pid"
    fi
    rm -f "$pidfile"
    started=()
    since="$(now_ms)"
    start_broker "$1"
    say "waiting until broker $1 is registered and no partition is under-replicated (up to ${timeout}s)"
    if ! "$STROM_VENV/bin/python" bin/_cluster-wait.py in-sync "$zk_connect" "$timeout" "$1" "$(cat "$pidfile")" "$since"; then
        report_dead
        say "broker $1 is not back in sync; its output: $log_dir/broker-$(broker_name "$1").out"
        ok=1   # leave it running: it may still catch up
        exit 1
    fi
}

case "$action" in
    start | broker | add)
        since="$(now_ms)"
        for i in "${to_start[@]}"; do start_broker "$i"; done
        [ ${#to_start[@]} -eq 0 ] || wait_registered "$since" "${to_start[@]}"
        ;;
    restart)
        restart_broker "$target"
        ;;
    rolling)
        # The controller last, so that the controller moves once (Kafka's advice).
        controller="$("$STROM_VENV/bin/python" bin/_cluster-wait.py controller "$zk_connect")"
        order=()
        for i in "${ids[@]}"; do [ "$i" = "$controller" ] || order+=("$i"); done
        [ -z "$controller" ] || order+=("$controller")
        for i in "${order[@]}"; do
            say "rolling restart: broker $i"
            restart_broker "$i"
        done
        say "rolling restart done: brokers ${order[*]}"
        ;;
esac

if [ "$rest" = 1 ] && ! alive "$run_dir/rest-rest.pid" && ! start_rest "$bootstrap"; then
    exit 1
fi
ok=1
echo "bootstrap servers: $bootstrap"
[ "$secure" = 0 ] || secure_hint "$bootstrap"
echo "stop with: $stop_hint"
