"""Without Ryuk, containers of a test run killed before its teardown stay behind:
`remove_orphans` removes those whose owner process (label org.strom.testing.owner) is gone,
and leaves a live process's alone."""
from __future__ import annotations

import os
import socket
import subprocess

import pytest

from broker.testing.container_support import OWNER_LABEL, docker_client, remove_orphans

pytestmark = pytest.mark.integration


def test_remove_orphans_takes_only_containers_of_exited_processes(strom_image):
    gone = subprocess.Popen(["true"])
    gone.wait()                                   # a pid no process has any more
    client = docker_client()
    made = {}
    for owner, pid in (("dead", gone.pid), ("alive", os.getpid())):
        made[owner] = client.containers.create(
            strom_image, ["sleep", "60"], labels={OWNER_LABEL: f"{socket.gethostname()}:{pid}"})
    try:
        assert remove_orphans(client) >= 1
        left = {c.id for c in client.containers.list(all=True, filters={"label": OWNER_LABEL})}
        assert made["dead"].id not in left
        assert made["alive"].id in left
    finally:
        for c in made.values():
            try:
                c.remove(force=True)
            except Exception:   # the orphan is already gone
                pass
