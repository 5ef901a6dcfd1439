"""What `broker.testing.containers` needs around Docker: the image to run, Ryuk, a readiness
probe over the Kafka protocol, a network whose containers can keep their address across a
disconnect, and the removal of containers a killed test run left behind.

Ryuk, testcontainers' reaper, runs from an image pulled from a registry. Where that image is
not on the Docker host (no registry reachable, as on strom's machines), `settle_ryuk()` turns
Ryuk off for this process unless TESTCONTAINERS_RYUK_DISABLED says otherwise; every container
and network made here then carries OWNER_LABEL (host name and process id), and
`remove_orphans()` removes those whose process is gone.
"""
from __future__ import annotations

import importlib.metadata
import logging
import os
import socket
import time
import uuid
from typing import Any, Callable, TypeVar

import docker
import docker.errors
from docker.types import IPAMConfig, IPAMPool
from testcontainers.core.config import testcontainers_config
from testcontainers.core.network import Network

from .probe import METADATA_VERSION, request

log = logging.getLogger("strom.testing.containers")

IMAGE_NAME = "strom"
OWNER_LABEL = "org.strom.testing.owner"
T = TypeVar("T")


class ImageMissing(RuntimeError):
    """The strom image is not on the Docker host (nothing can be pulled for it)."""


def default_image() -> str:
    """strom:<installed version>, the tag bin/build-image.sh gives (strom:latest when strom
    is not installed, e.g. run from a source tree)."""
    try:
        return f"{IMAGE_NAME}:{importlib.metadata.version('strom')}"
    except importlib.metadata.PackageNotFoundError:
        return f"{IMAGE_NAME}:latest"


def docker_client() -> docker.DockerClient:
    return docker.from_env()


def require_image(client: docker.DockerClient, image: str) -> None:
    """Raise ImageMissing unless `image` is on the Docker host: testcontainers would try to
    pull it and fail slowly with a registry error."""
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise ImageMissing(f"image {image} is not on the Docker host: build it with "
                           f"bin/build-image.sh (in strom's repository)") from None


def settle_ryuk(client: docker.DockerClient) -> None:
    """Keep Ryuk when its image is here or the user asked for it; else turn it off (see the
    module's docstring)."""
    if testcontainers_config.ryuk_disabled:
        return
    try:
        client.images.get(testcontainers_config.ryuk_image)
        return
    except docker.errors.ImageNotFound:
        pass
    if os.environ.get("TESTCONTAINERS_RYUK_DISABLED"):
        raise ImageMissing(
            f"TESTCONTAINERS_RYUK_DISABLED={os.environ['TESTCONTAINERS_RYUK_DISABLED']} asks for "
            f"Ryuk, but its image {testcontainers_config.ryuk_image} is not on the Docker host "
            f"and cannot be pulled: set TESTCONTAINERS_RYUK_DISABLED=true")
    log.info("Ryuk's image %s is not on the Docker host: Ryuk is off (strom's containers are "
             "removed when they stop, or by remove_orphans())", testcontainers_config.ryuk_image)
    testcontainers_config.ryuk_disabled = True


def owner_labels() -> dict[str, str]:
    return {OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}"}


def _orphaned(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def remove_orphans(client: docker.DockerClient | None = None) -> int:
    """Remove the containers and networks made here by processes of this host that have
    exited (a test run killed before its teardown); returns how many containers went."""
    client = client or docker_client()
    removed = 0
    for c in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
        if _orphaned(c.labels.get(OWNER_LABEL, "")):
            c.remove(force=True)
            removed += 1
    for n in client.networks.list(filters={"label": OWNER_LABEL}):
        if _orphaned((n.attrs.get("Labels") or {}).get(OWNER_LABEL, "")):
            try:
                n.remove()
            except docker.errors.APIError as e:
                log.warning("could not remove network %s: %s", n.name, e)
    return removed


def pinnable_network(client: docker.DockerClient) -> Network:
    """A (created) bridge network with its subnet given at creation, which is what lets
    `docker network connect --ip` give a reconnected container its old address back. The
    subnet is one Docker itself picks as free (a first network made without one, then
    removed): a subnet chosen here could collide with the host's own routes."""
    probe = client.networks.create(f"strom-probe-{uuid.uuid4().hex[:12]}", driver="bridge",
                                   labels=owner_labels())
    try:
        probe.reload()
        subnet = probe.attrs["IPAM"]["Config"][0]["Subnet"]
    finally:
        probe.remove()
    ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=subnet)])
    return Network(docker_network_kw={"driver": "bridge", "ipam": ipam,
                                      "labels": owner_labels()}).create()


def broker_metadata(host: str, port: int, topics: list[str] | None = None,
                    timeout: float = 2.0) -> Any:
    """The Metadata answer of the broker on host:port about `topics` (none by default; never
    creating one); OSError when it does not answer."""
    body = {"topics": [{"name": t} for t in topics or []], "allow_auto_topic_creation": False}
    return request(port, "Metadata", METADATA_VERSION, body, timeout, host=host)


def wait_until(what: str, check: Callable[[], T | None], timeout: float,
               alive: Callable[[], str | None] = lambda: None, interval: float = 0.05) -> T:
    """Poll `check` until it returns something; `alive` returns why waiting is pointless
    (a container that exited, with its logs)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            result = check()
            if result is not None:
                return result
        except (OSError, EOFError) as e:
            last = e
        dead = alive()
        if dead:
            raise RuntimeError(f"{what}: {dead}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout:.0f} s" + (f" (last error: {last})" if last else ""))
        time.sleep(interval)
