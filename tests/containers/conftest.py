"""The container tests run the strom image (bin/build-image.sh; bin/run-tests.sh builds it
when missing or older than the sources). Without Docker or without an up-to-date image they
are skipped, and under CI (CI=true) they fail: there, bin/run-tests.sh must have set them up."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"a prerequisite of the container tests is missing under CI: {reason}")
    pytest.skip(reason)


def image_out_of_date() -> str | None:
    """Why the image cannot be used (missing, or built from other sources), or None."""
    r = subprocess.run([str(REPO / "bin/build-image.sh"), "--check"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return "the strom image is missing or older than the sources: run bin/build-image.sh"
    return None


@pytest.fixture(scope="session")
def strom_image() -> str:
    """The image's name, once Docker answers and the image matches the sources; containers
    that a killed earlier run left behind are removed first."""
    try:
        import docker
        client = docker.from_env()
        client.ping()
    except Exception as e:   # no daemon, no socket, no docker package: all mean the same here
        unavailable(f"Docker does not answer ({e}): as root, bin/run-tests.sh installs and starts it")
    why = image_out_of_date()
    if why:
        unavailable(why)
    from broker.testing.container_support import default_image, remove_orphans
    removed = remove_orphans(client)
    if removed:
        print(f"removed {removed} containers left by earlier runs")
    return default_image()
