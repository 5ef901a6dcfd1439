"""The image is built from the current sources (bin/build-image.sh, one command; its time and
size are printed) and holds what the containers run: the entry point of this tree and a
Python of the host's minor version, which the host-built wheels need."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.containers.conftest import REPO

pytestmark = pytest.mark.integration


def inspect(image: str, template: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "--format", template, image],
                          capture_output=True, text=True, check=True).stdout.strip()


def label(image: str, name: str) -> str:
    return inspect(image, f'{{{{ index .Config.Labels "{name}" }}}}')


def test_image_is_built_from_the_current_sources(strom_image):
    want = subprocess.run([str(REPO / "bin/build-image.sh"), "--source-hash"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert len(want) == 16
    assert label(strom_image, "org.strom.source-hash") == want
    size_mb = int(inspect(strom_image, "{{.Size}}")) / 1e6
    print(f"{strom_image}: sources {want}, built in {label(strom_image, 'org.strom.build-seconds')} s "
          f"by bin/build-image.sh, {size_mb:.0f} MB, base {label(strom_image, 'org.strom.base')}")


def test_image_runs_this_trees_entry_point_and_the_hosts_python(strom_image):
    began = time.monotonic()
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", strom_image, "sh", "-c",
         "cat /usr/local/bin/strom-container-start; echo '---'; "
         "python -c 'import sys, broker; print(\"%d.%d\" % sys.version_info[:2])'; "
         "java -version 2>&1 | head -n 1; ls /usr/share/java/zookeeper.jar"],
        capture_output=True, text=True, check=True, timeout=120).stdout
    entry, _, rest = out.partition("---\n")
    assert entry == (REPO / "bin/container-start.sh").read_text()
    py, java, jar = rest.splitlines()
    assert py == "%d.%d" % sys.version_info[:2]
    assert "openjdk" in java and jar == "/usr/share/java/zookeeper.jar"
    print(f"python {py}, {java}; a container ran and exited in {time.monotonic() - began:.2f} s")


def test_image_builds_from_nothing_with_one_command(strom_image, long_run, tmp_path):
    """--long: bin/build-image.sh with an empty cache and names of its own (debootstrap from
    the mirror, wheels, install), as on a fresh machine; the image it makes serves a round
    trip. The default run checks the image run-tests.sh built instead (above)."""
    if not long_run:
        pytest.skip("a build from nothing takes minutes: --long or STROM_LONG_TESTS=1")
    import os

    from broker.testing.containers import StromContainer
    from tests.containers.test_strom_container import round_trip
    names = {"STROM_IMAGE_NAME": "strom-fresh-build", "STROM_BASE_IMAGE_NAME": "strom-fresh-base"}
    env = {**os.environ, **names, "STROM_IMAGE_CACHE": str(tmp_path / "cache")}
    began = time.monotonic()
    try:
        r = subprocess.run([str(REPO / "bin/build-image.sh")], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=900)
        took = time.monotonic() - began
        assert r.returncode == 0, r.stderr[-3000:]
        image = f"strom-fresh-build:{strom_image.partition(':')[2]}"
        print(f"bin/build-image.sh from an empty cache: {took:.0f} s, "
              f"{int(inspect(image, '{{.Size}}')) / 1e6:.0f} MB")
        with StromContainer(image) as strom:
            assert round_trip(strom.get_bootstrap_server(), "fresh", [b"x", b"y"]) == [b"x", b"y"]
    finally:
        out = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                             capture_output=True, text=True).stdout.split()
        made = [i for i in out if i.split(":")[0] in names.values()]
        if made:
            subprocess.run(["docker", "rmi", "-f", *made], capture_output=True)
