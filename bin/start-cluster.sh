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
#       servers and how to stop them (bin/stop-cluster.sh). With N < 3 the internal topics'
#       replication factors are lowered to N. Refuses to start over a running one or onto a
#       port in use; when a start fails, stops what it started.
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
set -euo pipefail
usage() {   # the comment block at the top of this file
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit "${1:-1}"
}

brokers=3 data_dir="" standalone=0 dry_run=0 setup=1 brokers_given=0 secure=0 rest=0
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
        --no-setup) setup=0; shift ;;
        -h | --help) usage 0 ;;
        *) echo "$0: unknown argument: $1" >&2; usage ;;
    esac
done
[[ "$brokers" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --brokers wants a positive number, not '$brokers'" >&2; exit 1; }
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --timeout wants seconds, not '$timeout'" >&2; exit 1; }
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
    if [ "$n" -lt 3 ]; then   # internal topics cannot have more replicas than brokers
        printf '%s\n' --override "offsets.topic.replication.factor=$n" \
            --override "transaction.state.log.replication.factor=$n" \
            --override "transaction.state.log.min.isr=$((n < 2 ? n : 2))"
    fi
}

generate_configs() {
    local i port logs
    if [ "$secure" = 1 ]; then
        secure_kit "$bootstrap"
    fi
    if [ "$custom_dir" = 1 ] || [ "$brokers" -gt 3 ]; then
        mkdir -p "$data_dir/config"
    fi
    if [ "$custom_dir" = 1 ]; then
        sed "s#^dataDir=.*#dataDir=$data_dir/zookeeper#" config/zookeeper.properties > "$zk_config"
    fi
    for ((i = 3; i < brokers; i++)); do
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
        for ((i = 0; i < brokers; i++)); do
            write_secure_config "$(broker_config "$i")" "$(broker_port "$i")" "$(launch_config "$i")"
        done
    fi
}

bootstrap=""
for ((i = 0; i < brokers; i++)); do
    bootstrap="${bootstrap:+$bootstrap,}127.0.0.1:$(broker_port "$i")"
done
zk_connect="$(prop config/server-0.properties zookeeper.connect)"

if [ "$dry_run" = 1 ]; then
    [ "$custom_dir" = 0 ] || show "generate $zk_config (dataDir=$data_dir/zookeeper)"
    for ((i = 3; i < brokers; i++)); do
        show "generate $(broker_config "$i") from config/server-2.properties (port $(broker_port "$i"))"
    done
    if [ "$secure" = 1 ]; then
        secure_kit "$bootstrap"
        for ((i = 0; i < brokers; i++)); do
            write_secure_config "$(broker_config "$i")" "$(broker_port "$i")" "$(launch_config "$i")"
        done
    fi
    show "nohup bin/zookeeper-server-start.sh $zk_config > $log_dir/zookeeper-zookeeper.out &   # pid -> $run_dir/zookeeper-zookeeper.pid"
    show "wait until ZooKeeper on 127.0.0.1:$zk_port serves (ruok/srvr)"
    for ((i = 0; i < brokers; i++)); do
        cfg="$(launch_config "$i")"
        mapfile -t overrides < <(broker_overrides "$i")
        show "nohup bin/kafka-server-start.sh $cfg" "${overrides[@]}" \
            "> $log_dir/broker-$(basename "$cfg" .properties).out &   # pid -> $run_dir/broker-$(basename "$cfg" .properties).pid"
    done
    show "wait until $brokers brokers are in $zk_connect /brokers/ids and /controller exists"
    [ "$rest" = 0 ] || start_rest "$bootstrap"
    echo "bootstrap servers: $bootstrap"
    [ "$secure" = 0 ] || secure_hint "$bootstrap"
    echo "stop with: $stop_hint"
    exit 0
fi

# Refuse to start twice, or onto ports something else holds.
for file in "$run_dir"/*.pid; do
    [ -e "$file" ] || continue
    if pid="$(strom_pid_of "$file")"; then
        say "$(basename "$file" .pid) is already running (pid $pid, $file): stop with $stop_hint"
        exit 1
    fi
    rm -f "$file"
done
metrics_ports="$(for ((i = 0; i < brokers; i++)); do broker_metrics_port "$i"; done)"
for port in "$zk_port" $(echo "$bootstrap" | tr ',' '\n' | sed 's/.*://') $metrics_ports; do
    if port_in_use "$port"; then
        say "127.0.0.1:$port is already in use (another cluster, or bin/start-cluster.sh --standalone?)"
        exit 1
    fi
done

mkdir -p "$run_dir" "$log_dir"
generate_configs

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

launch zookeeper zookeeper bin/zookeeper-server-start.sh "$zk_config"
deadline=$((SECONDS + timeout))
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

broker_pids=()
for ((i = 0; i < brokers; i++)); do
    cfg="$(launch_config "$i")"
    mapfile -t overrides < <(broker_overrides "$i")
    launch broker "$(basename "$cfg" .properties)" bin/kafka-server-start.sh "$cfg" "${overrides[@]}"
    broker_pids+=("$(cat "$run_dir/broker-$(basename "$cfg" .properties).pid")")
done

say "waiting until $brokers brokers are registered in ZooKeeper ($zk_connect) and a controller is elected"
if ! "$STROM_VENV/bin/python" - "$zk_connect" "$brokers" "$((deadline - SECONDS))" "${broker_pids[@]}" <<'EOF'
import json, logging, os, sys, time
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

logging.getLogger("kazoo").setLevel(logging.CRITICAL)
connect, want, timeout, pids = sys.argv[1], int(sys.argv[2]), max(float(sys.argv[3]), 5.0), sys.argv[4:]
hosts, slash, chroot = connect.partition("/")
root = "/" + chroot.strip("/") if slash and chroot.strip("/") else ""

def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

zk = KazooClient(hosts=hosts, timeout=10.0)
zk.start(timeout=15)
deadline, ids, controller, said = time.monotonic() + timeout, [], None, 0.0
try:
    while True:
        dead = [p for p in pids if not running(p)]
        if dead:
            print(f"[strom] broker process(es) {' '.join(dead)} exited", file=sys.stderr)
            sys.exit(2)
        try:
            ids = sorted(int(c) for c in zk.get_children(root + "/brokers/ids"))
        except NoNodeError:
            ids = []
        try:
            controller = json.loads(zk.get(root + "/controller")[0])["brokerid"]
        except (NoNodeError, ValueError, KeyError, TypeError):
            controller = None
        if len(ids) >= want and controller is not None:
            print(f"[strom] brokers {ids} registered; broker {controller} is the controller",
                  file=sys.stderr)
            sys.exit(0)
        now = time.monotonic()
        if now >= deadline:
            print(f"[strom] after {timeout:.0f}s: registered brokers {ids}, controller {controller}",
                  file=sys.stderr)
            sys.exit(1)
        if now - said >= 10:
            said = now
            print(f"[strom] registered so far: {ids or 'none'}; controller: {controller}",
                  file=sys.stderr)
        time.sleep(0.2)
finally:
    zk.stop()
    zk.close()
EOF
then
    report_dead
    exit 1
fi

if [ "$rest" = 1 ] && ! start_rest "$bootstrap"; then
    exit 1
fi
ok=1
echo "bootstrap servers: $bootstrap"
[ "$secure" = 0 ] || secure_hint "$bootstrap"
echo "stop with: $stop_hint"
