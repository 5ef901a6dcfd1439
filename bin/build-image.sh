#!/usr/bin/env bash
# Build the strom container image with one command, without pulling anything from a registry:
#
#   bin/build-image.sh                 build strom:<version> and strom:latest if missing or stale
#   bin/build-image.sh --force         rebuild even when the image is up to date
#   bin/build-image.sh --source-hash   print the hash of what goes into the image, and exit
#   bin/build-image.sh --check         exit 0 when the image is up to date, 1 otherwise
#
# How (as root; as root it also installs docker.io and debootstrap and starts dockerd, see
# strom_setup_containers in bin/_setup.sh):
#   1. A Debian bookworm root from `debootstrap --variant=minbase` with Python 3.11 (venv) and,
#      for the ZooKeeper of StromClusterContainer, Debian's ZooKeeper jars and a headless JRE.
#      Kept as a tar under $STROM_IMAGE_CACHE, keyed by the package list and this recipe, and
#      imported once with `docker import` as strom-base:<key>.
#   2. The host's pip builds wheels of strom (from this working tree) and its dependencies;
#      a container of strom-base with no network installs them into a venv at /opt/strom;
#      `docker commit` makes that the image, with bin/container-start.sh as its entry point.
# The image is labelled org.strom.source-hash: `--check` and bin/run-tests.sh compare it with
# the hash of the current sources, so an image is never used stale.
#
# Environment: STROM_IMAGE_CACHE (default ~/.cache/strom-image: the root tar, .debs, wheels),
# STROM_DEBIAN_MIRROR (default http://deb.debian.org/debian), STROM_IMAGE_NAME and
# STROM_BASE_IMAGE_NAME (default strom and strom-base).
set -euo pipefail
shopt -s inherit_errexit   # a failure inside $(...) stops the build too
cd "$(dirname "$0")/.."
# shellcheck source=bin/_setup.sh
source bin/_setup.sh

# Other names serve a build beside the usual one (the long test of a build from nothing).
IMAGE=${STROM_IMAGE_NAME:-strom}
BASE_IMAGE=${STROM_BASE_IMAGE_NAME:-strom-base}
SUITE=bookworm
# python3-venv: ensurepip gives the image's venv its pip. libzookeeper-java is Debian's
# ZooKeeper without its service scripts, which would pull a full (X11) JRE through default-jre.
PACKAGES=python3,python3-venv,procps,libzookeeper-java,openjdk-17-jre-headless
MIRROR=${STROM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${STROM_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom-image}
ENTRY=bin/container-start.sh

BUILD_START=$(date +%s)
# say, with the seconds since the build began: where a slow build spends its time.
step() { say "[$(( $(date +%s) - BUILD_START )) s] $*"; }

version() { sed -n 's/^version *= *"\(.*\)"/\1/p' pyproject.toml | head -n 1; }

# Makes the Debian root in $1. Its own text is part of the base key: edit it, get a new base.
make_base_root() {
    local root=$1
    # Download and unpack first; install with dpkg's unsafe I/O (no fsync per file): the
    # root is thrown away if anything fails, and the fsyncs cost a third of the install
    # (second stage 91 s instead of 141 s on a loaded 2-core machine).
    # (Run as an `if` condition, where set -e does not act: each step says when it failed.)
    debootstrap --foreign --variant=minbase --cache-dir="$CACHE/debs" --include="$PACKAGES" \
        "$SUITE" "$root" "$MIRROR" >&2 || return 1
    mkdir -p "$root/etc/dpkg/dpkg.cfg.d" || return 1
    echo force-unsafe-io > "$root/etc/dpkg/dpkg.cfg.d/strom-unsafe-io" || return 1
    chroot "$root" /debootstrap/debootstrap --second-stage >&2 || return 1
    rm -f "$root/etc/dpkg/dpkg.cfg.d/strom-unsafe-io"
    # What a container never reads: package lists and downloads, manuals, translations.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
        "$root"/usr/share/man "$root"/usr/share/info "$root"/usr/share/locale
}

base_key() {
    { echo "$SUITE $PACKAGES"; declare -f make_base_root; } | sha256sum | cut -c1-16
}

# The files that go into the image, by content: the packages' Python sources, pyproject.toml,
# the entry point and this script (README.md is replaced by a stub in the build: its edits
# never change the image).
source_hash() {
    {
        echo "base $(base_key)"
        find broker zkcoord clients spark_jobs -name '*.py' -not -path '*/__pycache__/*' -print0 |
            sort -z | xargs -0 sha256sum
        sha256sum pyproject.toml setup.py "$ENTRY" bin/build-image.sh
    } | sha256sum | cut -c1-16
}

image_hash() {
    docker image inspect --format '{{ index .Config.Labels "org.strom.source-hash" }}' \
        "$IMAGE:$(version)" 2>/dev/null
}

# strom-base:<key>: imported from the cached root tar, made first when missing.
ensure_base() {
    local key tar root
    key="$(base_key)"
    if docker image inspect "$BASE_IMAGE:$key" >/dev/null 2>&1; then
        say "base image $BASE_IMAGE:$key is there"
        echo "$BASE_IMAGE:$key"
        return 0
    fi
    tar="$CACHE/base-$key.tar"
    if [ ! -f "$tar" ]; then
        command -v debootstrap >/dev/null 2>&1 || { say "debootstrap not found (apt-get install -y debootstrap)"; return 1; }
        [ "$(id -u)" -eq 0 ] || { say "debootstrap and chroot need root: run as root"; return 1; }
        root="$CACHE/root-$key.tmp"
        rm -rf "$root"
        mkdir -p "$CACHE/debs"
        step "debootstrap --variant=minbase $SUITE with $PACKAGES (cached in $tar; log:" \
            "$CACHE/debootstrap.log)"
        if ! make_base_root "$root" 2> "$CACHE/debootstrap.log"; then
            tail -n 30 "$CACHE/debootstrap.log" >&2
            say "debootstrap failed (whole log: $CACHE/debootstrap.log)"
            return 1
        fi
        tar -C "$root" --numeric-owner -cf "$tar.tmp" .
        mv "$tar.tmp" "$tar"
        rm -rf "$root"
        # An earlier package list's root is dead weight.
        find "$CACHE" -maxdepth 1 -name 'base-*.tar' -not -name "base-$key.tar" -delete
    fi
    step "docker import $tar as $BASE_IMAGE:$key"
    docker import --change 'LABEL org.strom.base=true' "$tar" "$BASE_IMAGE:$key" >/dev/null
    # Earlier bases lose their tag (their layers stay while an image still stands on them).
    docker images --format '{{.Repository}}:{{.Tag}}' "$BASE_IMAGE" | grep -v -x "$BASE_IMAGE:$key" |
        xargs -r docker rmi >/dev/null 2>&1 || true
    echo "$BASE_IMAGE:$key"
}

# Wheels of strom (this working tree) and of its dependencies, for this Python, into $1.
# From the wheel cache alone when it has everything (10 s where asking the index takes 25 s);
# otherwise from the index, and the cache keeps what came (and the build requirements).
build_wheels() {
    local out=$1 src py="$STROM_VENV/bin/python" cached="$CACHE/wheels"
    src="$(dirname "$out")/src"
    mkdir -p "$src" "$cached"
    cp pyproject.toml setup.py "$src/"
    echo "strom: a Kafka-compatible broker in Python (container build)" > "$src/README.md"
    tar --exclude=__pycache__ --exclude='*.so' -cf - broker zkcoord clients spark_jobs | tar -C "$src" -xf -
    step "pip wheel: strom and its dependencies (log: $out.log)"
    if "$py" -m pip wheel --disable-pip-version-check --no-index --find-links "$cached" \
        --wheel-dir "$out" "$src" > "$out.log" 2>&1; then
        return 0
    fi
    step "not all in the wheel cache: pip wheel from the index"
    rm -rf "$out"
    if ! { "$py" -m pip wheel --disable-pip-version-check --wheel-dir "$out" "$src" &&
        "$py" -m pip download --disable-pip-version-check --dest "$cached" $("$py" -c \
            'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"])')
    } >> "$out.log" 2>&1; then
        tail -n 30 "$out.log" >&2
        return 1
    fi
    find "$out" -name '*.whl' -not -name 'strom-*' -exec cp -f {} "$cached/" \;
}

build() {
    local base work hash ver container old new
    ver="$(version)"
    hash="$(source_hash)"
    base="$(ensure_base)"
    strom_venv_ok || { strom_setup_system && strom_setup_python; }   # a fresh machine
    # Wheels of the host's Python go into the image's: both must be the same minor version.
    local host_py image_py
    host_py="$("$STROM_VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    image_py="$(docker run --rm --network none "$base" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [ "$host_py" != "$image_py" ]; then
        say "the image's Python is $image_py, the host's $host_py: the host's wheels would not fit"
        return 1
    fi
    work="$(mktemp -d "${TMPDIR:-/tmp}/strom-image.XXXXXX")"
    container="strom-image-build-$$"
    # shellcheck disable=SC2064  # expanded now: the locals are gone when the trap runs
    trap "docker rm -f '$container' >/dev/null 2>&1 || true; rm -rf '$work'" EXIT
    build_wheels "$work/wheels"
    cp "$ENTRY" "$work/container-start.sh"
    step "installing strom into $base (no network)"
    docker run --name "$container" --network none -v "$work:/tmp/build:ro" "$base" sh -euc '
        python3 -m venv /opt/strom
        /opt/strom/bin/pip install --quiet --no-index --disable-pip-version-check \
            --find-links /tmp/build/wheels strom
        install -m 0755 /tmp/build/container-start.sh /usr/local/bin/strom-container-start
        mkdir -p /var/lib/strom /etc/strom
        rm -rf /root/.cache' >&2
    step "docker commit as $IMAGE:$ver"
    old="$(docker image inspect --format '{{.Id}}' "$IMAGE:$ver" 2>/dev/null || true)"
    docker commit \
        --change 'ENV PATH=/opt/strom/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENTRYPOINT ["/usr/local/bin/strom-container-start"]' \
        --change 'CMD ["broker"]' \
        --change 'EXPOSE 9092 9093 2181' \
        --change 'WORKDIR /var/lib/strom' \
        --change "LABEL org.strom.source-hash=$hash org.strom.version=$ver org.strom.base=$base org.strom.build-seconds=$(( $(date +%s) - BUILD_START ))" \
        "$container" "$IMAGE:$ver" >/dev/null
    docker tag "$IMAGE:$ver" "$IMAGE:latest"
    new="$(docker image inspect --format '{{.Id}}' "$IMAGE:$ver")"
    # The image this one replaces, unless a container still uses it.
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        docker rmi "$old" >/dev/null 2>&1 || true
    fi
    say "built $IMAGE:$ver ($IMAGE:latest) in $(( $(date +%s) - BUILD_START )) s:" \
        "$(docker image inspect --format '{{.Size}}' "$IMAGE:$ver" | awk '{printf "%.0f MB", $1/1e6}'), sources $hash"
}

case "${1:-}" in
    --source-hash) source_hash; exit 0 ;;
    --check) [ "$(image_hash)" = "$(source_hash)" ]; exit ;;
    --force|"") ;;
    *) echo "USAGE: $0 [--force | --check | --source-hash]" >&2; exit 2 ;;
esac
strom_setup_containers || { say "cannot build the image without docker and debootstrap"; exit 1; }
if [ "${1:-}" != --force ] && [ "$(image_hash)" = "$(source_hash)" ]; then
    say "$IMAGE:$(version) is up to date (sources $(source_hash))"
    exit 0
fi
build
