# shellcheck shell=bash
# Shared by the bin/ scripts (sourced, never run; the caller has already cd'ed to the repo root).
#
#   strom_setup          strom_setup_system + strom_setup_python
#   strom_setup_system   as root: apt-get install what is missing (python3-venv, kcat, zookeeper,
#                        a Java runtime for PySpark)
#   strom_setup_python   create .venv if needed; pip install -e '.[test,spark]' when pyproject.toml,
#                        setup.py, the module it compiles (or the extras installed) changed
#   strom_setup_node     for the tests: kafkajs into tests/js/node_modules (`npm ci`, pinned by
#                        tests/js/package-lock.json); as root apt-get install nodejs npm if missing
#   strom_spark_env      export what Spark's Python workers need (PYSPARK_PYTHON = the venv's)
#   strom_apt_install WHY PKG...  as root apt-get install PKG...; else say what to run; 1 if not
#   strom_setup_containers  for the container and network-fault tests (bin/run-tests.sh,
#                        bin/build-image.sh; never bin/start-cluster.sh): as root apt-get install
#                        docker.io, debootstrap, iptables and iproute2 if missing, and start
#                        dockerd if it does not answer; returns 1 if something is still missing
#   strom_launch KIND NAME DAEMON CMD...   record data/run/KIND-NAME.pid, run CMD in the foreground
#                        (exec) or, with DAEMON=1, in the background with output in data/logs/
#                        ($STROM_DATA_DIR instead of data, e.g. a test's own directory)
#   strom_pid_of FILE    the pid in a pid file if that process is still a strom broker/zookeeper
#   strom_keep_log FILE  before a process writes FILE again: FILE -> FILE.1 -> ... -> FILE.5
#   strom_stop PID...    SIGTERM, wait up to $STROM_STOP_TIMEOUT s (30), then SIGKILL
#
# Everything done is printed on stderr, prefixed with [strom].

STROM_ROOT="$(pwd -P)"
STROM_VENV=.venv
STROM_STAMP="$STROM_VENV/.strom-install-stamp"
# Extras installed into .venv: the test tools, and pyspark + pyarrow for tests/spark and the
# ETL jobs (spark_jobs/). pip only warns about an extra pyproject.toml does not declare.
STROM_EXTRAS="${STROM_EXTRAS:-test,spark}"

say() { echo "[strom] $*" >&2; }

# A Python >= 3.11 interpreter to build the venv with (python3.11 first, as on Debian bookworm).
strom_python() {
    local py
    for py in python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 &&
            "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"
            return 0
        fi
    done
    return 1
}

strom_setup_system() {
    local pkgs=() py
    if ! py="$(strom_python)"; then
        pkgs+=(python3 python3-venv)
    elif ! strom_venv_ok && ! "$py" -c 'import ensurepip' 2>/dev/null; then
        pkgs+=(python3-venv)  # Debian splits venv's pip bootstrap out of python3
    fi
    command -v kcat >/dev/null 2>&1 || pkgs+=(kcat)
    [ -f /usr/share/java/zookeeper.jar ] || pkgs+=(zookeeper)
    command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)  # PySpark's JVM
    [ ${#pkgs[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "missing system packages: ${pkgs[*]} (not root, so not installing them:" \
            "sudo apt-get install -y ${pkgs[*]}); tests that need them are skipped"
        return 0
    fi
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    say "apt-get install -y ${pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
}

# .venv runs a Python >= 3.11 that has pip (a venv made without ensurepip has none).
strom_venv_ok() {
    "$STROM_VENV/bin/python" -c 'import sys, importlib.util as u
sys.exit(sys.version_info < (3, 11) or u.find_spec("pip") is None)' 2>/dev/null
}

strom_setup_python() {
    local py want
    if ! strom_venv_ok; then
        py="$(strom_python)" || { say "no Python >= 3.11 found (python3.11 or python3)"; return 1; }
        say "creating $STROM_VENV with $py ($("$py" -V 2>&1))"
        "$py" -m venv --clear "$STROM_VENV"
        rm -f "$STROM_STAMP"
    fi
    # setup.py compiles clients/protocol/record_rows.py (mypyc): an edit of it needs a rebuild.
    want="$(cat pyproject.toml setup.py clients/protocol/record_rows.py | sha256sum | cut -d' ' -f1) [$STROM_EXTRAS] $("$STROM_VENV/bin/python" -V 2>&1)"
    if [ -f "$STROM_STAMP" ] && [ "$(cat "$STROM_STAMP")" = "$want" ] &&
        "$STROM_VENV/bin/python" -c 'import importlib.metadata as m; m.version("strom")' 2>/dev/null; then
        say "$STROM_VENV is up to date (pyproject.toml, setup.py, record_rows.py unchanged)"
        return 0
    fi
    say "pip install -e '.[$STROM_EXTRAS]' into $STROM_VENV (log: $STROM_VENV/pip-install.log)"
    if ! "$STROM_VENV/bin/python" -m pip install --disable-pip-version-check -e ".[$STROM_EXTRAS]" \
        > "$STROM_VENV/pip-install.log" 2>&1; then
        tail -n 40 "$STROM_VENV/pip-install.log" >&2
        say "pip install failed (whole log: $STROM_VENV/pip-install.log)"
        return 1
    fi
    echo "$want" > "$STROM_STAMP"
}

# kafkajs, the Node.js client tests/integration/test_kafkajs.py drives. Only bin/run-tests.sh
# needs it; a failure here is reported and the kafkajs tests then skip (or fail under CI=true).
strom_setup_node() {
    local stamp=tests/js/node_modules/.strom-install-stamp want
    if ! command -v npm >/dev/null 2>&1; then
        strom_apt_install "for the kafkajs tests" nodejs npm ||
            { say "the kafkajs tests are skipped"; return 0; }
    fi
    want="$(sha256sum tests/js/package-lock.json | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    say "npm ci in tests/js (kafkajs, pinned by tests/js/package-lock.json)"
    if ! (cd tests/js && npm ci --no-audit --no-fund --loglevel=error) >&2; then
        say "npm ci failed: the kafkajs tests are skipped"
        return 0
    fi
    echo "$want" > "$stamp"
}

# Spark's Python workers must run the venv's interpreter (the system python has neither
# pyarrow nor strom) and import spark_jobs and clients from the repository.
# spark_jobs.session.strom_spark_session sets the same; this covers pyspark used directly.
strom_spark_env() {
    export PYSPARK_PYTHON="$STROM_ROOT/$STROM_VENV/bin/python"
    export PYSPARK_DRIVER_PYTHON="$PYSPARK_PYTHON"
    export PYTHONPATH="$STROM_ROOT${PYTHONPATH:+:$PYTHONPATH}"
}

# As root, apt-get update and install PKG...; otherwise say what to run. 1 when not installed.
strom_apt_install() {
    local why=$1
    shift
    if [ "$(id -u)" -ne 0 ]; then
        say "missing $why: $* (not root, so not installing: sudo apt-get install -y $*)"
        return 1
    fi
    say "apt-get update; apt-get install -y $*"
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } ||
        { say "could not install $*"; return 1; }
}

strom_setup_containers() {
    local pkgs=() i
    # dockerd, not docker: some machines carry the docker client alone (/usr/local/bin/docker),
    # and that answers `command -v docker` without an engine to talk to.
    command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || pkgs+=(debootstrap)
    command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
    command -v ip >/dev/null 2>&1 || pkgs+=(iproute2)
    if [ ${#pkgs[@]} -gt 0 ]; then
        strom_apt_install "for the container and network-fault tests" "${pkgs[@]}" || return 1
    fi
    docker info >/dev/null 2>&1 && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "dockerd does not answer (not root, so not starting it)"
        return 1
    fi
    # A pid file left by a dockerd killed with the rest of an earlier session stops a new one
    # when its pid has since gone to another process.
    if [ -f /var/run/docker.pid ] &&
        [ "$(cat "/proc/$(cat /var/run/docker.pid)/comm" 2>/dev/null)" != dockerd ]; then
        rm -f /var/run/docker.pid
    fi
    # No init system to ask here: dockerd runs in the background, outliving this script.
    say "starting dockerd (log: ${STROM_DOCKERD_LOG:=/var/log/strom-dockerd.log})"
    nohup dockerd > "$STROM_DOCKERD_LOG" 2>&1 < /dev/null &
    for ((i = 0; i < 600; i++)); do
        docker info >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    tail -n 20 "$STROM_DOCKERD_LOG" >&2
    say "dockerd did not answer within 60 s"
    return 1
}

strom_setup() {
    strom_setup_system
    strom_setup_python
    strom_spark_env
}

# The command-line fragment that identifies a process of KIND.
strom_pattern() {
    case "$1" in
        broker) echo " -m broker " ;;
        zookeeper) echo "QuorumPeerMain" ;;
        *) echo "$1" ;;
    esac
}

# The pid recorded in FILE, if that process still runs and is of the kind the file is named
# after (data/run/KIND-NAME.pid): a stale file left by a crash or Ctrl-C is not trusted.
strom_pid_of() {
    local file=$1 pid kind cmdline
    [ -f "$file" ] || return 1
    pid="$(cat "$file" 2>/dev/null)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kind="$(basename "$file" .pid)"
    kind="${kind%%-*}"
    cmdline="$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")" || return 1
    [[ " $cmdline" == *"$(strom_pattern "$kind")"* ]] || return 1
    echo "$pid"
}

strom_launch() {
    local kind=$1 name=$2 daemon=$3 pidfile pid log
    shift 3
    local data=${STROM_DATA_DIR:-data}
    mkdir -p "$data/run" "$data/logs"
    pidfile="$data/run/$kind-$name.pid"
    if pid="$(strom_pid_of "$pidfile")"; then
        say "$kind $name is already running (pid $pid, $pidfile)"
        return 1
    fi
    if [ "$daemon" = 1 ]; then
        log="$data/logs/$kind-$name.out"
        strom_keep_log "$log"
        nohup "$@" > "$log" 2>&1 < /dev/null &
        echo $! > "$pidfile"
        say "started $kind $name in the background (pid $!); output in $log"
    else
        echo $$ > "$pidfile"
        say "starting $kind $name in the foreground (pid $$): $*"
        exec "$@"
    fi
}

# Keep a restarted process's earlier output (the story of a crash): FILE.1 is the previous
# run's, FILE.5 the oldest kept.
strom_keep_log() {
    local file=$1 i
    [ -s "$file" ] || return 0
    for ((i = 4; i >= 1; i--)); do
        [ ! -e "$file.$i" ] || mv -f "$file.$i" "$file.$((i + 1))"
    done
    mv -f "$file" "$file.1"
}

strom_stop() {
    local timeout=${STROM_STOP_TIMEOUT:-30} pid left i
    for pid in "$@"; do
        kill -TERM "$pid" 2>/dev/null && say "sent SIGTERM to pid $pid"
    done
    for ((i = 0; i < timeout * 10; i++)); do
        left=()
        for pid in "$@"; do
            kill -0 "$pid" 2>/dev/null && left+=("$pid")
        done
        [ ${#left[@]} -eq 0 ] && return 0
        sleep 0.1
    done
    say "still running after ${timeout}s, sending SIGKILL: ${left[*]}"
    kill -KILL "${left[@]}" 2>/dev/null || true
}
